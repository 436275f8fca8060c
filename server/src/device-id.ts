/**
 * A device id the service has checked: parsed once, where a request is read, and handed on as
 * this value, so that no service splits or validates the same string again.
 */
import { type Brand, DeviceIdError, validateDeviceId } from '@svc/sdk';
import { InvalidError } from './errors.ts';

/** Only parseDeviceId has it, so no other code can make a ParsedDeviceId but by casting. */
declare const parsed: unique symbol;

export interface ParsedDeviceId {
  /** The full prefixed form `<brand>:<native_id>`, as the wire and the store hold it. */
  readonly deviceId: string;
  readonly brand: Brand;
  readonly nativeId: string;
  readonly [parsed]: true;
}

/**
 * `deviceId` from a path, query or body, checked by the SDK's validateDeviceId (and, when `brand`
 * is given, its agreement with it): the parsed value, or the 422 problem with the rule's stable code.
 */
export function parseDeviceId(deviceId: string, brand?: string): ParsedDeviceId {
  try {
    const parts = validateDeviceId(deviceId, brand === undefined ? undefined : { brand });
    return { deviceId, ...parts } as ParsedDeviceId;
  } catch (error) {
    if (error instanceof DeviceIdError) {
      throw new InvalidError(error.code, error.message, { title: 'Invalid device id' });
    }
    throw error;
  }
}
