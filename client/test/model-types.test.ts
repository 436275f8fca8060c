/**
 * The v4 models at the type level: `npm run typecheck` compiles this file, and a model that
 * gained a wire (snake_case) name or lost its camelCase one fails it. The same check runs in a
 * project that installed the packed SDK (package.test.ts).
 */
import { describe, expectTypeOf, test } from 'vitest';
import type {
  Brand,
  CarStatus,
  Command,
  Install,
  Location,
  MiniApp,
  VerifiedIdentity,
} from '../src/index.ts';
import { toCarStatus } from '../src/index.ts';

describe('SDK v4 model types', () => {
  test('when CarStatus is used then deviceId, brand and lastSeen are its fields and device_id is not', () => {
    expectTypeOf<CarStatus>().toHaveProperty('deviceId').toEqualTypeOf<string>();
    expectTypeOf<CarStatus>().toHaveProperty('brand').toEqualTypeOf<Brand>();
    expectTypeOf<CarStatus>().toHaveProperty('lastSeen').toEqualTypeOf<string | null>();
    expectTypeOf<CarStatus>().not.toHaveProperty('device_id');
    expectTypeOf<CarStatus>().not.toHaveProperty('last_seen');

    const status = toCarStatus({
      device_id: 'brand_a:1HGCM82633A004352',
      brand: 'brand_a',
      online: false,
      last_seen: null,
      state: {},
      reported_at: null,
    });
    // @ts-expect-error device_id is the wire name: the model says deviceId
    status.device_id;
    expectTypeOf(status.deviceId).toBeString();
  });

  test('when the other models are used then their fields are camelCase too', () => {
    expectTypeOf<Install>().toHaveProperty('installedApps');
    expectTypeOf<Install>().not.toHaveProperty('installed_apps');
    expectTypeOf<Location>().toHaveProperty('recordedAt');
    expectTypeOf<Location>().not.toHaveProperty('recorded_at');
    expectTypeOf<Command>().toHaveProperty('commandId');
    expectTypeOf<Command>().not.toHaveProperty('command_id');
    // Free-form: whatever keys the car or the caller sent.
    expectTypeOf<Command['args']>().toEqualTypeOf<{ [key: string]: unknown }>();
    expectTypeOf<MiniApp>().toHaveProperty('latestVersion');
    expectTypeOf<VerifiedIdentity>().toHaveProperty('deviceId');
    expectTypeOf<VerifiedIdentity>().not.toHaveProperty('device_id');
  });
});
