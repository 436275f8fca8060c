/** A device id from a path, query or body: valid, or the 422 problem with its stable code. */
import { DeviceIdError, type DeviceIdParts, validateDeviceId } from '@svc/sdk';
import { ProblemError } from './problem.ts';

export function parseDeviceId(deviceId: string, brand?: string): DeviceIdParts {
  try {
    return validateDeviceId(deviceId, brand === undefined ? undefined : { brand });
  } catch (error) {
    if (error instanceof DeviceIdError) {
      throw new ProblemError(422, error.code, error.message, { title: 'Invalid device id' });
    }
    throw error;
  }
}
