/** Device identifiers `<brand>:<native_id>`: validation, formatting, redaction and MQTT topic segments. */
import { type Brand, brands, nativeIdPatterns } from '../../generated/brands.ts';
import { describe, quote } from './quote.ts';

/** Why a device id was refused; the HTTP API answers each with 422 and this as its `code`. */
export const deviceIdErrorCodes = [
  'missing_prefix',
  'unknown_brand',
  'invalid_native_id',
  'brand_mismatch',
] as const;

export type DeviceIdErrorCode = (typeof deviceIdErrorCodes)[number];

export interface DeviceIdParts {
  brand: Brand;
  nativeId: string;
}

export interface ValidateDeviceIdOptions {
  /** The `brand` sent alongside the id; when given it must equal the id's prefix exactly. */
  brand?: string;
}

const visibleOnRedaction = 4;

/**
 * Characters no native id may hold, whatever its brand's pattern allows, because on MQTT the
 * native id is a topic segment: `/` separates segments, `+` and `#` are wildcards, `:` would make
 * the prefixed form ambiguous.
 */
const topicSyntax = /[:/+#]/;

/**
 * Nor these: whitespace, control and format characters (zero-width space, bidi overrides) let two
 * ids look alike or break a log line; MQTT forbids or discourages controls and noncharacters; a
 * lone surrogate cannot be encoded as the UTF-8 a topic must be.
 */
const unseen = /[\p{White_Space}\p{Cc}\p{Cf}\p{Cs}\p{Noncharacter_Code_Point}]/u;

const topicUnsafe = new RegExp(`${topicSyntax.source}|${unseen.source}`, 'u');

const knownBrands: ReadonlySet<string> = new Set(brands);

const brandList = brands.join(', ');

const validShape = `write it as <brand>:<native_id>, with brand one of ${brandList}`;

/** A device id that was refused; `code` says why, `deviceId` is the input as given. */
export class DeviceIdError extends Error {
  override readonly name = 'DeviceIdError';
  readonly code: DeviceIdErrorCode;
  readonly deviceId: string;

  constructor(code: DeviceIdErrorCode, deviceId: string, message: string) {
    super(message);
    this.code = code;
    this.deviceId = deviceId;
  }
}

export function isBrand(value: unknown): value is Brand {
  return typeof value === 'string' && knownBrands.has(value);
}

/**
 * Splits a device id on its first `:` and checks both parts, then its agreement with `options.brand`;
 * an id that is wrong by itself reports that rather than a mismatch. The server hands it untrusted
 * JSON, so a value that is not a string is refused with a DeviceIdError (`missing_prefix`, as it
 * has no prefix) instead of a TypeError. An empty prefix (`:ABC`) is `missing_prefix` as well.
 */
export function validateDeviceId(deviceId: string, options?: ValidateDeviceIdOptions): DeviceIdParts {
  if (typeof deviceId !== 'string') {
    throw new DeviceIdError(
      'missing_prefix',
      '',
      `device id must be a string, got ${describe(deviceId)}: ${validShape}`,
    );
  }
  const colon = deviceId.indexOf(':');
  if (colon <= 0) {
    // `brand_a%3A…` arriving decoded once: the caller encoded the id twice.
    const encodedTwice = /^[a-z0-9_]+%3a/i.test(deviceId);
    throw new DeviceIdError(
      'missing_prefix',
      deviceId,
      encodedTwice
        ? `device id ${quote(deviceId)} has no brand prefix: it looks URL-encoded twice; encode the ":" once, as %3A`
        : `device id ${quote(deviceId)} has no brand prefix: ${validShape}`,
    );
  }
  const prefix = deviceId.slice(0, colon);
  if (!isBrand(prefix)) {
    throw new DeviceIdError(
      'unknown_brand',
      deviceId,
      `device id ${quote(deviceId)} has unknown brand prefix ${quote(prefix)}: ` +
        `the brand must be exactly one of ${brandList} (lowercase)`,
    );
  }
  const nativeId = deviceId.slice(colon + 1);
  checkNativeId(prefix, nativeId, deviceId);
  const expected = options?.brand;
  if (expected !== undefined && expected !== prefix) {
    throw new DeviceIdError(
      'brand_mismatch',
      deviceId,
      `device id ${quote(deviceId)} has brand prefix ${quote(prefix)} but brand is ${describe(expected)}: ` +
        'the brand must equal the prefix of the device id',
    );
  }
  return { brand: prefix, nativeId };
}

export function isValidDeviceId(deviceId: string, options?: ValidateDeviceIdOptions): boolean {
  try {
    validateDeviceId(deviceId, options);
    return true;
  } catch (error) {
    if (error instanceof DeviceIdError) return false;
    throw error;
  }
}

/** The device id `<brand>:<nativeId>`, refused unless it would pass validateDeviceId. */
export function formatDeviceId(brand: Brand, nativeId: string): string {
  return joinDeviceId(brand, nativeId);
}

/** The `{brand}` and `{device_id}` segments of `cars/{brand}/{device_id}/...`, the only place without the prefix. */
export function toTopicSegments(deviceId: string): DeviceIdParts {
  return validateDeviceId(deviceId);
}

/** The device id named by the `{brand}` and `{device_id}` segments of a topic, which come from the broker unchecked. */
export function fromTopicSegments(brand: string, nativeId: string): string {
  return joinDeviceId(brand, nativeId);
}

/**
 * The id masked with `*` but for its last 4 characters, at the same length so its shape shows; ids
 * of 4 characters or fewer are masked whole. Logs and error messages call it with whatever they
 * hold, so it never throws: a non-string gives `''`, and a shown character that could disturb a log
 * line (a control, whitespace or format character) is masked too. Lengths count code points so a
 * surrogate pair is never cut in half.
 */
export function redactDeviceId(deviceId: string): string {
  if (typeof deviceId !== 'string') return '';
  const chars = Array.from(deviceId);
  const shownFrom = chars.length > visibleOnRedaction ? chars.length - visibleOnRedaction : chars.length;
  return chars.map((char, index) => (index < shownFrom || unseen.test(char) ? '*' : char)).join('');
}

function joinDeviceId(brand: string, nativeId: string): string {
  // Plain JavaScript callers may pass anything; interpolating some values (a symbol) would throw.
  const deviceId = typeof brand === 'string' && typeof nativeId === 'string' ? `${brand}:${nativeId}` : '';
  if (!isBrand(brand)) {
    throw new DeviceIdError(
      'unknown_brand',
      deviceId,
      `brand ${describe(brand)} is not a known brand: the brand must be exactly one of ${brandList} (lowercase)`,
    );
  }
  checkNativeId(brand, nativeId, deviceId);
  return deviceId;
}

function checkNativeId(brand: Brand, nativeId: string, deviceId: string): void {
  const pattern = nativeIdPatterns[brand];
  let problem: string;
  if (typeof nativeId !== 'string') {
    problem = 'is not a string';
  } else if (nativeId === '') {
    problem = 'is empty';
  } else {
    const unsafe = topicUnsafe.exec(nativeId)?.[0];
    if (unsafe !== undefined) {
      problem =
        `holds ${quote(unsafe)}, and no native id may hold ":", "/", "+", "#", ` +
        'whitespace or control characters';
    } else if (!pattern.test(nativeId)) {
      const upper = nativeId.toUpperCase();
      problem =
        upper !== nativeId && pattern.test(upper)
          ? `does not match the ${brand} format ${pattern.source}: write its letters in upper case`
          : `does not match the ${brand} format ${pattern.source}`;
    } else {
      return;
    }
  }
  throw new DeviceIdError(
    'invalid_native_id',
    deviceId,
    `device id ${quote(deviceId)} has an invalid native id: after "${brand}:" it ${problem}`,
  );
}
