/**
 * The car of the dev-server's panel: what the simulated host answers the app with (`ctx.status()`,
 * `location()`, `install()`, as SDK v4 models) and the car its identity tokens name. The panel
 * sends changes; each is checked here, so that the app never sees a car the service would refuse.
 */
import { supportedBrands, supportsBrand } from '@svc/manifest';
import type { CarStatus, Install, Location } from '@svc/sdk';
import { DeviceIdError, validateDeviceId } from '@svc/sdk';
import type { Manifest } from '../publish/manifest.ts';

export interface SimulatedCar {
  /** The full prefixed device id, valid for its brand. */
  deviceId: string;
  online: boolean;
  ignition: boolean;
  doorsLocked: boolean;
  latitude: number;
  longitude: number;
  /** The user's BCP 47 language tag, canonical (`en-GB`). */
  locale: string;
  /** When it last changed, RFC 3339. */
  changedAt: string;
}

/** A brand_a VIN: the car `svc dev` starts with unless `--car` names another. */
export const defaultDeviceId = 'brand_a:1HGCM82633A004352';
export const defaultLocale = 'en-GB';

/** A change the panel asked for that cannot be made; `field` is the panel's name for it. */
export class CarChangeError extends Error {
  override readonly name = 'CarChangeError';
  readonly field: string;
  constructor(field: string, message: string) {
    super(message);
    this.field = field;
  }
}

export function checkDeviceId(deviceId: unknown): string {
  if (typeof deviceId !== 'string') throw new CarChangeError('deviceId', 'the device id must be text');
  try {
    validateDeviceId(deviceId);
  } catch (error) {
    if (error instanceof DeviceIdError) throw new CarChangeError('deviceId', error.message);
    throw error;
  }
  return deviceId;
}

export function checkLocale(locale: unknown): string {
  let canonical: string | undefined;
  try {
    [canonical] = typeof locale === 'string' && locale.length <= 35 ? Intl.getCanonicalLocales(locale) : [];
  } catch {
    canonical = undefined;
  }
  if (canonical === undefined || !/^[A-Za-z0-9-]+$/.test(canonical)) {
    throw new CarChangeError(
      'locale',
      `${JSON.stringify(locale)} is not a BCP 47 language tag such as en-GB`,
    );
  }
  return canonical;
}

export function newCar(deviceId: string, locale: string, now: Date): SimulatedCar {
  return {
    deviceId: checkDeviceId(deviceId),
    online: true,
    ignition: false,
    doorsLocked: true,
    // Somewhere a map shows something: Munich.
    latitude: 48.1374,
    longitude: 11.5755,
    locale: checkLocale(locale),
    changedAt: now.toISOString(),
  };
}

/** The car after the panel's `change` (only the fields it names); throws CarChangeError. */
export function changeCar(car: SimulatedCar, change: unknown, now: Date): SimulatedCar {
  if (typeof change !== 'object' || change === null || Array.isArray(change)) {
    throw new CarChangeError('car', 'a change is a JSON object of the fields to change');
  }
  const asked = change as Record<string, unknown>;
  const known = ['deviceId', 'online', 'ignition', 'doorsLocked', 'latitude', 'longitude', 'locale'];
  const unknown = Object.keys(asked).filter((name) => !known.includes(name));
  if (unknown.length > 0) {
    throw new CarChangeError(String(unknown[0]), `the panel has no field ${JSON.stringify(unknown[0])}`);
  }
  const next = { ...car, changedAt: now.toISOString() };
  if ('deviceId' in asked) next.deviceId = checkDeviceId(asked.deviceId);
  if ('locale' in asked) next.locale = checkLocale(asked.locale);
  for (const name of ['online', 'ignition', 'doorsLocked'] as const) {
    if (!(name in asked)) continue;
    const value = asked[name];
    if (typeof value !== 'boolean') throw new CarChangeError(name, `${name} is true or false`);
    next[name] = value;
  }
  next.latitude = coordinate(asked, 'latitude', 90, car.latitude);
  next.longitude = coordinate(asked, 'longitude', 180, car.longitude);
  return next;
}

function coordinate(asked: Record<string, unknown>, name: string, limit: number, current: number): number {
  if (!(name in asked)) return current;
  const value = asked[name];
  if (typeof value !== 'number' || !Number.isFinite(value) || Math.abs(value) > limit) {
    throw new CarChangeError(name, `${name} is a number of degrees from -${limit} to ${limit}`);
  }
  return value;
}

/** What the host answers the app with, as the service's v4 models (DESIGN §10). */
export interface CarModels {
  status: CarStatus;
  location: Location;
  install: Install;
}

export function carModels(car: SimulatedCar, manifest: Manifest | undefined, hostVersion: string): CarModels {
  const { brand } = validateDeviceId(car.deviceId);
  return {
    status: {
      deviceId: car.deviceId,
      brand,
      online: car.online,
      lastSeen: car.changedAt,
      state: { ignition: car.ignition, doors_locked: car.doorsLocked },
      reportedAt: car.changedAt,
    },
    location: {
      deviceId: car.deviceId,
      brand,
      latitude: car.latitude,
      longitude: car.longitude,
      recordedAt: car.changedAt,
    },
    install: {
      deviceId: car.deviceId,
      brand,
      hostVersion,
      // The app being developed runs on the car; nothing else does.
      installedApps: manifest ? [{ appId: manifest.id, version: manifest.version }] : [],
      reportedAt: car.changedAt,
    },
  };
}

/**
 * Why the app would not reach this car: its manifest lists brands, not the car's. The service
 * would refuse to install it there or to sign its tokens (409 `brand_not_supported`); the dev-server
 * runs it all the same, so that the developer can try it, and says so. Undefined when it would run.
 */
export function brandWarning(car: SimulatedCar, manifest: Manifest | undefined): string | undefined {
  if (!manifest) return undefined;
  const { brand } = validateDeviceId(car.deviceId);
  if (supportsBrand(manifest, brand)) return undefined;
  return `the car ${car.deviceId} is a ${brand} car, but manifest.json lists brands ${supportedBrands(manifest).join(', ')} only: the service would not install the app on it nor sign its identity tokens there (add "${brand}" to "brands" in manifest.json, or pick a car of a listed brand)`;
}
