import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import {
  type Brand,
  brands,
  DeviceIdError,
  type DeviceIdErrorCode,
  formatDeviceId,
  fromTopicSegments,
  isBrand,
  isValidDeviceId,
  redactDeviceId,
  toTopicSegments,
  validateDeviceId,
} from '../src/index.ts';

/** One valid native id per brand; typed by Brand so a new brand in the contract needs one here. */
const sampleNativeIds: { readonly [B in Brand]: string } = {
  brand_a: '1HGCM82633A004352',
  brand_b: 'abc-123_X.y',
  brand_c: 'C',
  brand_d: 'd'.repeat(64),
};

const vin = sampleNativeIds.brand_a;
const brandAId = `brand_a:${vin}`;

/** Test names stay readable and single-line: everything outside printable ASCII is shown escaped. */
function show(text: string): string {
  const escaped = Array.from(text, (char) => {
    const codePoint = char.codePointAt(0) ?? 0;
    return codePoint >= 0x20 && codePoint <= 0x7e ? char : `\\u${codePoint.toString(16).padStart(4, '0')}`;
  }).join('');
  return escaped.length > 60 ? `${escaped.slice(0, 57)}...` : escaped;
}

function assertRefused(run: () => unknown, code: DeviceIdErrorCode, deviceId?: string): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(error instanceof DeviceIdError, `expected a DeviceIdError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    if (deviceId !== undefined) assert.equal(error.deviceId, deviceId);
    return true;
  });
}

interface RefusalCase {
  deviceId: string;
  code: DeviceIdErrorCode;
  brand?: string;
  why?: string;
}

const refusals: RefusalCase[] = [
  // missing_prefix
  { deviceId: 'brand_a', code: 'missing_prefix' },
  { deviceId: '', code: 'missing_prefix', why: 'the empty string' },
  { deviceId: vin, code: 'missing_prefix', why: 'a bare VIN, the v3 form' },
  { deviceId: `:${vin}`, code: 'missing_prefix', why: 'an empty prefix' },
  { deviceId: ':', code: 'missing_prefix', why: 'both parts empty' },
  { deviceId: `brand_a\uff1a${vin}`, code: 'missing_prefix', why: 'a fullwidth colon' },
  // unknown_brand
  { deviceId: `BRAND_A:${vin}`, code: 'unknown_brand', why: 'an upper-case prefix' },
  { deviceId: `Brand_a:${vin}`, code: 'unknown_brand', why: 'a capitalised prefix' },
  { deviceId: `br\u0430nd_a:${vin}`, code: 'unknown_brand', why: 'a Cyrillic a in the prefix' },
  { deviceId: `\u0432rand_a:${vin}`, code: 'unknown_brand', why: 'a Cyrillic letter opening the prefix' },
  { deviceId: `brand_a\u200b:${vin}`, code: 'unknown_brand', why: 'a zero-width space in the prefix' },
  { deviceId: ` brand_a:${vin}`, code: 'unknown_brand', why: 'a space before the prefix' },
  { deviceId: `brand_a :${vin}`, code: 'unknown_brand', why: 'a space after the prefix' },
  { deviceId: 'brand_z:abc', code: 'unknown_brand', why: 'a brand that does not exist' },
  { deviceId: `vin:${vin}`, code: 'unknown_brand', why: 'the old single-brand word as prefix' },
  { deviceId: `cars/brand_a:${vin}`, code: 'unknown_brand', why: 'a topic path as prefix' },
  // invalid_native_id: empty parts and the first-colon rule
  { deviceId: 'brand_a:', code: 'invalid_native_id', why: 'an empty native id' },
  { deviceId: 'brand_b:', code: 'invalid_native_id', why: 'an empty native id' },
  { deviceId: 'brand_b:abc:def', code: 'invalid_native_id', why: 'a second colon' },
  { deviceId: `brand_a:brand_a:${vin}`, code: 'invalid_native_id', why: 'a doubled prefix' },
  { deviceId: `brand_a::${vin}`, code: 'invalid_native_id', why: 'a doubled colon' },
  // invalid_native_id: the VIN alphabet and length
  { deviceId: `brand_a:${vin.slice(0, 16)}I`, code: 'invalid_native_id', why: 'an I in the VIN' },
  { deviceId: `brand_a:${vin.slice(0, 16)}O`, code: 'invalid_native_id', why: 'an O in the VIN' },
  { deviceId: `brand_a:${vin.slice(0, 16)}Q`, code: 'invalid_native_id', why: 'a Q in the VIN' },
  { deviceId: `brand_a:${vin.slice(0, 16)}`, code: 'invalid_native_id', why: 'a 16-character VIN' },
  { deviceId: `brand_a:${vin}0`, code: 'invalid_native_id', why: 'an 18-character VIN' },
  { deviceId: `brand_a:${vin.toLowerCase()}`, code: 'invalid_native_id', why: 'a lower-case VIN' },
  { deviceId: `brand_a: ${vin.slice(1)}`, code: 'invalid_native_id', why: 'a space after the colon' },
  // invalid_native_id: look-alike Unicode
  {
    deviceId: `brand_a:${vin.slice(0, 10)}\u0410${vin.slice(11)}`,
    code: 'invalid_native_id',
    why: 'a Cyrillic A in the VIN',
  },
  {
    deviceId: `brand_a:${vin.slice(0, 8)}\u200b${vin.slice(8)}`,
    code: 'invalid_native_id',
    why: 'zero-width',
  },
  { deviceId: 'brand_b:abc\u200bdef', code: 'invalid_native_id', why: 'a zero-width space' },
  { deviceId: 'brand_b:abc\ufeff', code: 'invalid_native_id', why: 'a byte-order mark' },
  { deviceId: 'brand_b:abc\u202edef', code: 'invalid_native_id', why: 'a right-to-left override' },
  { deviceId: 'brand_b:\uff21\uff22\uff23', code: 'invalid_native_id', why: 'fullwidth letters' },
  { deviceId: 'brand_b:abc\ud800', code: 'invalid_native_id', why: 'a lone surrogate' },
  // invalid_native_id: control characters
  { deviceId: 'brand_b:abc\n', code: 'invalid_native_id', why: 'a trailing newline' },
  { deviceId: 'brand_b:ab\u0000c', code: 'invalid_native_id', why: 'a NUL' },
  { deviceId: 'brand_b:ab\u007fc', code: 'invalid_native_id', why: 'a DEL' },
  { deviceId: 'brand_b:ab\u0085c', code: 'invalid_native_id', why: 'a C1 next-line control' },
  // invalid_native_id: MQTT topic metacharacters
  { deviceId: 'brand_b:abc/def', code: 'invalid_native_id', why: 'a topic level separator' },
  { deviceId: 'brand_b:abc+def', code: 'invalid_native_id', why: 'a single-level wildcard' },
  { deviceId: 'brand_b:abc#', code: 'invalid_native_id', why: 'a multi-level wildcard' },
  { deviceId: 'brand_b:+', code: 'invalid_native_id', why: 'a wildcard alone' },
  // invalid_native_id: whitespace
  { deviceId: 'brand_b:abc def', code: 'invalid_native_id', why: 'a space' },
  { deviceId: 'brand_b:abc\tdef', code: 'invalid_native_id', why: 'a tab' },
  { deviceId: 'brand_b:abc\u00a0def', code: 'invalid_native_id', why: 'a no-break space' },
  { deviceId: 'brand_b:abc\u3000def', code: 'invalid_native_id', why: 'an ideographic space' },
  { deviceId: 'brand_b:abc\u2028def', code: 'invalid_native_id', why: 'a line separator' },
  // invalid_native_id: other brands' formats
  { deviceId: `brand_b:${'b'.repeat(65)}`, code: 'invalid_native_id', why: 'longer than 64' },
  { deviceId: 'brand_c:abc!', code: 'invalid_native_id', why: 'punctuation outside the format' },
  { deviceId: 'brand_d:\u00e9t\u00e9', code: 'invalid_native_id', why: 'accented letters' },
  // brand_mismatch, checked only once the id itself is valid
  { deviceId: brandAId, brand: 'brand_b', code: 'brand_mismatch' },
  { deviceId: brandAId, brand: 'BRAND_A', code: 'brand_mismatch' },
  { deviceId: brandAId, brand: 'brand_a ', code: 'brand_mismatch' },
  { deviceId: brandAId, brand: '', code: 'brand_mismatch' },
  { deviceId: 'brand_b:abc', brand: 'brand_a', code: 'brand_mismatch' },
  { deviceId: 'brand_a:', brand: 'brand_b', code: 'invalid_native_id', why: "the id's own error wins" },
  { deviceId: 'brand_a', brand: 'brand_b', code: 'missing_prefix', why: "the id's own error wins" },
  { deviceId: 'brand_z:abc', brand: 'brand_z', code: 'unknown_brand', why: 'an unknown brand on both sides' },
];

describe('validateDeviceId refuses', () => {
  for (const { deviceId, code, brand, why } of refusals) {
    const given = brand === undefined ? '' : ` with brand '${show(brand)}'`;
    const note = why === undefined ? '' : ` (${why})`;
    test(`when the id is '${show(deviceId)}'${given}${note} then ${code}`, () => {
      const options = brand === undefined ? undefined : { brand };
      assertRefused(() => validateDeviceId(deviceId, options), code, deviceId);
      assert.equal(isValidDeviceId(deviceId, options), false);
    });
  }

  const notStrings: { value: unknown; what: string }[] = [
    { value: undefined, what: 'undefined' },
    { value: null, what: 'null' },
    { value: 42, what: 'a number' },
    { value: { brand: 'brand_a' }, what: 'an object' },
    { value: [brandAId], what: 'an array' },
    { value: Object.create(null), what: 'an object without prototype' },
  ];
  for (const { value, what } of notStrings) {
    test(`when the id is ${what} then missing_prefix, not a TypeError`, () => {
      assertRefused(() => validateDeviceId(value as string), 'missing_prefix', '');
      assert.equal(isValidDeviceId(value as string), false);
    });
  }
});

describe('validateDeviceId accepts', () => {
  const accepted: { deviceId: string; brand: Brand; nativeId: string }[] = [
    ...brands.map((brand) => ({
      deviceId: `${brand}:${sampleNativeIds[brand]}`,
      brand,
      nativeId: sampleNativeIds[brand],
    })),
    { deviceId: 'brand_a:WVWZZZ1JZXW000001', brand: 'brand_a', nativeId: 'WVWZZZ1JZXW000001' },
    { deviceId: 'brand_b:a', brand: 'brand_b', nativeId: 'a' },
    { deviceId: 'brand_b:.-_', brand: 'brand_b', nativeId: '.-_' },
    { deviceId: `brand_c:${'c'.repeat(64)}`, brand: 'brand_c', nativeId: 'c'.repeat(64) },
  ];
  for (const { deviceId, brand, nativeId } of accepted) {
    test(`when the id is '${show(deviceId)}' then brand ${brand} and its native id`, () => {
      assert.deepEqual(validateDeviceId(deviceId), { brand, nativeId });
      assert.equal(isValidDeviceId(deviceId), true);
    });
    test(`when the id is '${show(deviceId)}' with brand '${brand}' then the brands agree`, () => {
      assert.deepEqual(validateDeviceId(deviceId, { brand }), { brand, nativeId });
      assert.equal(isValidDeviceId(deviceId, { brand }), true);
    });
    test(`when ${brand} and '${show(nativeId)}' are formatted then the id is '${show(deviceId)}'`, () => {
      assert.equal(formatDeviceId(brand, nativeId), deviceId);
    });
  }

  test('when an id arrives URL-encoded twice then the error says so', () => {
    assert.throws(
      () => validateDeviceId(`brand_a%3A${vin}`),
      (error: unknown) =>
        error instanceof DeviceIdError &&
        error.code === 'missing_prefix' &&
        /URL-encoded twice; encode the ":" once, as %3A$/.test(error.message),
    );
  });

  test('when a VIN is written in lower case then the error says to write it in upper case', () => {
    assert.throws(
      () => validateDeviceId(`brand_a:${vin.toLowerCase()}`),
      (error: unknown) =>
        error instanceof DeviceIdError &&
        error.code === 'invalid_native_id' &&
        /write its letters in upper case$/.test(error.message),
    );
    // A native id that is wrong in other ways gets no such advice.
    assert.throws(
      () => validateDeviceId(`brand_a:${vin.slice(1)}`),
      (error: unknown) => error instanceof DeviceIdError && !/upper case/.test(error.message),
    );
  });

  test('when the brand option is undefined then no agreement is required', () => {
    assert.deepEqual(validateDeviceId(brandAId, { brand: undefined }), { brand: 'brand_a', nativeId: vin });
  });
});

describe('formatDeviceId refuses', () => {
  const cases: { brand: string; nativeId: string; code: DeviceIdErrorCode }[] = [
    { brand: 'brand_a', nativeId: vin.toLowerCase(), code: 'invalid_native_id' },
    { brand: 'brand_a', nativeId: '', code: 'invalid_native_id' },
    { brand: 'brand_b', nativeId: 'a:b', code: 'invalid_native_id' },
    { brand: 'BRAND_A', nativeId: vin, code: 'unknown_brand' },
    { brand: '', nativeId: vin, code: 'unknown_brand' },
  ];
  for (const { brand, nativeId, code } of cases) {
    test(`when the brand is '${show(brand)}' and the native id '${show(nativeId)}' then ${code}`, () => {
      assertRefused(() => formatDeviceId(brand as Brand, nativeId), code, `${brand}:${nativeId}`);
    });
  }
});

describe('isBrand', () => {
  for (const brand of brands) {
    test(`when the value is '${brand}' then it is a brand`, () => {
      assert.equal(isBrand(brand), true);
    });
  }
  const notBrands: unknown[] = [
    'BRAND_A',
    'Brand_a',
    'brand_a ',
    '',
    'vin',
    'toString',
    '__proto__',
    42,
    null,
  ];
  for (const value of notBrands) {
    test(`when the value is ${JSON.stringify(value)} then it is not a brand`, () => {
      assert.equal(isBrand(value), false);
    });
  }
});

describe('redactDeviceId', () => {
  const cases: { deviceId: string; redacted: string; what: string }[] = [
    { what: 'a valid id', deviceId: brandAId, redacted: `${'*'.repeat(brandAId.length - 4)}4352` },
    { what: 'a valid id of another brand', deviceId: 'brand_b:abc-123_X.y', redacted: '***************_X.y' },
    { what: 'five characters', deviceId: 'ab:cd', redacted: '*b:cd' },
    { what: 'four characters', deviceId: 'a:bc', redacted: '****' },
    { what: 'one character', deviceId: 'x', redacted: '*' },
    { what: 'the empty string', deviceId: '', redacted: '' },
    { what: 'an invalid id', deviceId: 'not an id', redacted: '*****n*id' },
    { what: 'an id ending in control characters', deviceId: 'brand_b:ab\r\n', redacted: '********ab**' },
    { what: 'an id ending in a bidi override', deviceId: 'brand_b:abc\u202e', redacted: '********abc*' },
  ];
  for (const { what, deviceId, redacted } of cases) {
    test(`when the id is ${what} then only its last 4 characters show, at the same length`, () => {
      assert.equal(redactDeviceId(deviceId), redacted);
      assert.equal(redacted.length, deviceId.length);
    });
  }

  test('when the id is very long then redaction does not throw and keeps the length', () => {
    const deviceId = `brand_b:${'x'.repeat(10_000)}`;
    assert.equal(redactDeviceId(deviceId), `${'*'.repeat(deviceId.length - 4)}xxxx`);
  });

  test('when the id holds a character outside the BMP then it is masked as one character', () => {
    assert.equal(redactDeviceId('abc\u{1f697}defg'), '****defg');
  });

  for (const value of [undefined, null, 42, {}]) {
    test(`when the value is ${JSON.stringify(value) ?? 'undefined'} then redaction gives '' and does not throw`, () => {
      assert.equal(redactDeviceId(value as string), '');
    });
  }
});

describe('topic segments', () => {
  for (const brand of brands) {
    const deviceId = `${brand}:${sampleNativeIds[brand]}`;
    test(`when a ${brand} id goes to topic segments and back then it is unchanged`, () => {
      const segments = toTopicSegments(deviceId);
      assert.deepEqual(segments, { brand, nativeId: sampleNativeIds[brand] });
      assert.equal(fromTopicSegments(segments.brand, segments.nativeId), deviceId);
    });
    test(`when a ${brand} id is put in a topic then the topic has one segment per part`, () => {
      const { brand: brandSegment, nativeId } = toTopicSegments(deviceId);
      assert.deepEqual(`cars/${brandSegment}/${nativeId}/status`.split('/'), [
        'cars',
        brand,
        sampleNativeIds[brand],
        'status',
      ]);
    });
  }

  const badSegments: { brand: string; nativeId: string; code: DeviceIdErrorCode }[] = [
    { brand: 'BRAND_A', nativeId: vin, code: 'unknown_brand' },
    { brand: '', nativeId: vin, code: 'unknown_brand' },
    { brand: '+', nativeId: vin, code: 'unknown_brand' },
    { brand: 'brand_z', nativeId: 'abc', code: 'unknown_brand' },
    { brand: 'brand_a', nativeId: '', code: 'invalid_native_id' },
    { brand: 'brand_a', nativeId: brandAId, code: 'invalid_native_id' },
    { brand: 'brand_a', nativeId: vin.toLowerCase(), code: 'invalid_native_id' },
    { brand: 'brand_b', nativeId: 'a/b', code: 'invalid_native_id' },
    { brand: 'brand_b', nativeId: '+', code: 'invalid_native_id' },
    { brand: 'brand_b', nativeId: '#', code: 'invalid_native_id' },
  ];
  for (const { brand, nativeId, code } of badSegments) {
    test(`when the topic segments are '${show(brand)}' and '${show(nativeId)}' then ${code}`, () => {
      assertRefused(() => fromTopicSegments(brand, nativeId), code, `${brand}:${nativeId}`);
    });
  }

  for (const { deviceId, code } of [
    { deviceId: 'brand_a', code: 'missing_prefix' },
    { deviceId: 'brand_b:a/b', code: 'invalid_native_id' },
  ] as const) {
    test(`when the id '${deviceId}' is turned into topic segments then ${code}`, () => {
      assertRefused(() => toTopicSegments(deviceId), code, deviceId);
    });
  }
});

describe('DeviceIdError', () => {
  test('when an id is refused then the error is an Error carrying its code, id and name', () => {
    const error = captureError(() => validateDeviceId('brand_a'));
    assert.ok(error instanceof Error);
    assert.ok(error instanceof DeviceIdError);
    assert.equal(error.name, 'DeviceIdError');
    assert.equal(error.code, 'missing_prefix');
    assert.equal(error.deviceId, 'brand_a');
    assert.match(String(error), /^DeviceIdError: /);
  });

  const messages: { deviceId: string; brand?: string; says: RegExp[] }[] = [
    {
      deviceId: 'brand_a',
      says: [/"brand_a" has no brand prefix/, /<brand>:<native_id>/, brandListPattern()],
    },
    { deviceId: `Brand_a:${vin}`, says: [/unknown brand prefix "Brand_a"/, brandListPattern()] },
    { deviceId: 'brand_a:ABC', says: [/invalid native id/, /brand_a format/] },
    { deviceId: 'brand_b:a/b', says: [/invalid native id/, /"\/"/] },
    { deviceId: brandAId, brand: 'brand_b', says: [/prefix "brand_a" but brand is "brand_b"/] },
  ];
  for (const { deviceId, brand, says } of messages) {
    test(`when '${deviceId}' is refused then the message says what is wrong and what is valid`, () => {
      const error = captureError(() => validateDeviceId(deviceId, { brand }));
      for (const pattern of says) assert.match(error.message, pattern);
    });
  }

  test('when the id is 10 000 characters long then the message stays short', () => {
    const deviceId = `brand_b:${'x'.repeat(10_000)}`;
    const error = captureError(() => validateDeviceId(deviceId));
    assert.equal(error.code, 'invalid_native_id');
    assert.equal(error.deviceId, deviceId);
    assert.ok(error.message.length < 400, `message is ${error.message.length} characters long`);
    assert.ok(!error.message.includes('x'.repeat(81)));
  });

  test('when the id has no colon and is 10 000 characters long then the message stays short', () => {
    const error = captureError(() => validateDeviceId('y'.repeat(10_000)));
    assert.ok(error.message.length < 400, `message is ${error.message.length} characters long`);
  });

  test('when the id is 10 000 control characters then the message stays short', () => {
    const error = captureError(() => validateDeviceId(`brand_b:${'\u0000'.repeat(10_000)}`));
    assert.ok(error.message.length < 400, `message is ${error.message.length} characters long`);
  });

  test('when the brand option is 10 000 characters long then the message stays short', () => {
    const error = captureError(() => validateDeviceId(brandAId, { brand: 'b'.repeat(10_000) }));
    assert.equal(error.code, 'brand_mismatch');
    assert.ok(error.message.length < 400, `message is ${error.message.length} characters long`);
  });

  test('when the id holds control characters then the message shows them escaped', () => {
    const error = captureError(() => validateDeviceId('brand_b:a\nb\u0000c\u001b[31m'));
    assert.doesNotMatch(error.message, /\p{Cc}/u);
    assert.match(error.message, /a\\nb\\u0000c\\u001b\[31m/);
  });

  test('when the id holds a look-alike letter then the message shows its code point', () => {
    const error = captureError(() => validateDeviceId(`brand_a:${vin.slice(0, 10)}\u0410${vin.slice(11)}`));
    assert.match(error.message, /\\u0410/);
    assert.doesNotMatch(error.message, /[^\x20-\x7e]/);
  });
});

function brandListPattern(): RegExp {
  return new RegExp(brands.join(', '));
}

function captureError(run: () => unknown): DeviceIdError {
  try {
    run();
  } catch (error) {
    if (error instanceof DeviceIdError) return error;
    throw error;
  }
  assert.fail('expected a DeviceIdError');
}
