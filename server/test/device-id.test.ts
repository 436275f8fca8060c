/**
 * A vehicle route's device id is parsed once, where the request is read, and services take the
 * parsed value: they never split or validate the string again. The HTTP answers to ids that are
 * refused are in uuid-ids, http-errors, car-commands and cars-provisioning.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import type { Principal } from '../src/auth/principal.ts';
import type { CommandService } from '../src/commands/command-service.ts';
import { type ParsedDeviceId, parseDeviceId } from '../src/device-id.ts';
import { InvalidError } from '../src/errors.ts';

const deviceId = 'brand_a:1HGCM82633A004352';

describe('parseDeviceId', () => {
  test('when a device id is valid then the parsed value carries it whole, its brand and its native id', () => {
    const parsed = parseDeviceId(deviceId, 'brand_a');
    assert.deepEqual(
      { deviceId: parsed.deviceId, brand: parsed.brand, nativeId: parsed.nativeId },
      { deviceId, brand: 'brand_a', nativeId: '1HGCM82633A004352' },
    );
  });

  test('when a device id is refused then it is the 422 refusal with the rule as its code', () => {
    const refusal = (run: () => unknown) => {
      try {
        run();
      } catch (error) {
        assert.ok(error instanceof InvalidError);
        return { code: error.code, title: error.title };
      }
      assert.fail('the id was taken');
    };
    assert.deepEqual(
      refusal(() => parseDeviceId('1HGCM82633A004352')),
      {
        code: 'missing_prefix',
        title: 'Invalid device id',
      },
    );
    assert.deepEqual(
      refusal(() => parseDeviceId(deviceId, 'brand_b')),
      {
        code: 'brand_mismatch',
        title: 'Invalid device id',
      },
    );
  });

  test('when a service is handed a device id then only a parsed one compiles (npm run typecheck)', () => {
    const request = { name: 'horn.honk', args: {}, ttl_seconds: 60 };
    const lookAlike = { deviceId, brand: 'brand_a', nativeId: '1HGCM82633A004352' } as const;
    // Type-checked, never run: the service would need a store.
    const send = (commands: CommandService, principal: Principal) => [
      // @ts-expect-error a string was never parsed
      commands.create(principal, deviceId, request),
      // @ts-expect-error nor is a look-alike made by hand: parseDeviceId is the only maker
      commands.create(principal, lookAlike, request),
      commands.create(principal, parseDeviceId(deviceId) satisfies ParsedDeviceId, request),
    ];
    assert.equal(typeof send, 'function');
  });
});
