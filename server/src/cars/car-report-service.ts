/**
 * What cars report over MQTT: kept as the bridge's intake hands it over (mqtt/intake/), and read
 * back by the vehicle read routes, for a car's owner and for admins (car-visibility.ts). Each
 * write names the car and keeps nothing of a car not provisioned: it says so by returning false.
 */
import type { Brand } from '@svc/sdk';
import type { components } from '../../../generated/openapi.ts';
import type { Principal } from '../auth/principal.ts';
import type { ParsedDeviceId } from '../device-id.ts';
import { NotFoundError } from '../errors.ts';
import type { Db } from '../store/db.ts';
import type { WebhookEvents } from '../webhooks/webhook-events.ts';
import {
  findCarLocation,
  findCarStatus,
  lockPresence,
  type StatusReport,
  savePresence,
  saveSighting,
  saveStatusReport,
} from './car-report-repository.ts';
import { visibleCar } from './car-visibility.ts';

export type CarStatus = components['schemas']['CarStatus'];
export type Location = components['schemas']['Location'];
export type Install = components['schemas']['Install'];

/** Optional numbers of a fix are left out when the car did not send them, as in its telemetry. */
function present<T extends Record<string, number | null>>(fields: T): Partial<Record<keyof T, number>> {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== null)) as Partial<
    Record<keyof T, number>
  >;
}

/**
 * Tells the car's owner that the car connected or went away (`car.online` / `car.offline`),
 * inside the transaction that changed its presence, when it changed.
 */
export async function presenceChanged(
  trx: Db,
  webhookEvents: WebhookEvents | undefined,
  car: { deviceId: string; wasOnline: boolean; online: boolean; at: string },
): Promise<void> {
  if (car.online === car.wasOnline || !webhookEvents) return;
  await webhookEvents.record(trx, [
    {
      type: car.online ? 'car.online' : 'car.offline',
      audience: { ownerOfCar: car.deviceId },
      at: new Date(car.at),
      data: () => ({
        device_id: car.deviceId,
        brand: car.deviceId.slice(0, car.deviceId.indexOf(':')),
        online: car.online,
        at: car.at,
      }),
    },
  ]);
}

export function createCarReportService(deps: { db: Db; webhookEvents?: WebhookEvents }) {
  const { db, webhookEvents } = deps;
  return {
    /** The car's report replaces the one kept; a live one (`seenAt`) moves its last seen. */
    saveStatus(report: StatusReport, seenAt: Date | undefined): Promise<boolean> {
      return saveStatusReport(db, report, seenAt);
    },

    /** Online or offline, as the car's newest presence message says (by its `at`); `seenAt` as above. */
    savePresence(
      presence: { deviceId: string; online: boolean; at: string },
      seenAt: Date | undefined,
    ): Promise<boolean> {
      // Without an endpoint to tell, the one statement it was (webhook-events.ts).
      if (!webhookEvents?.listens('car.online') && !webhookEvents?.listens('car.offline')) {
        return savePresence(db, presence, seenAt).then((saved) => saved !== undefined);
      }
      return db.transaction(async (trx) => {
        const wasOnline = await lockPresence(trx, presence.deviceId);
        const saved = await savePresence(trx, presence, seenAt);
        if (!saved) return false;
        await presenceChanged(trx, webhookEvents, {
          deviceId: presence.deviceId,
          wasOnline,
          online: saved.online,
          at: presence.at,
        });
        return true;
      });
    },

    /**
     * The car was heard from, at `seenAt` for a live message (undefined for a retained replay):
     * its last seen moves forward, never back. False when no such car is provisioned.
     */
    sighted(deviceId: string, seenAt: Date | undefined): Promise<boolean> {
      return saveSighting(db, deviceId, seenAt);
    },

    async status(principal: Principal, { deviceId }: ParsedDeviceId): Promise<CarStatus> {
      const row = visibleCar(principal, deviceId, await findCarStatus(db, deviceId));
      return {
        device_id: row.device_id,
        brand: row.brand as Brand,
        online: row.online ?? false,
        last_seen: row.last_seen?.toISOString() ?? null,
        state: row.state ?? {},
        reported_at: row.reported_at?.toISOString() ?? null,
      };
    },

    /** Before the car's first report: no host version, no apps, no report time. */
    async install(principal: Principal, { deviceId }: ParsedDeviceId): Promise<Install> {
      const row = visibleCar(principal, deviceId, await findCarStatus(db, deviceId));
      return {
        device_id: row.device_id,
        brand: row.brand as Brand,
        host_version: row.host_version,
        installed_apps: row.installed_apps ?? [],
        reported_at: row.reported_at?.toISOString() ?? null,
      };
    },

    async location(principal: Principal, { deviceId }: ParsedDeviceId): Promise<Location> {
      const row = visibleCar(principal, deviceId, await findCarLocation(db, deviceId));
      if (row.latitude === null || row.longitude === null || row.recorded_at === null) {
        throw new NotFoundError('no_location_yet', `The car ${deviceId} has sent no location fix yet.`);
      }
      return {
        device_id: row.device_id,
        brand: row.brand as Brand,
        latitude: row.latitude,
        longitude: row.longitude,
        ...present({ accuracy_m: row.accuracy_m, heading_deg: row.heading_deg, speed_kmh: row.speed_kmh }),
        recorded_at: row.recorded_at.toISOString(),
      };
    },
  };
}

export type CarReportService = ReturnType<typeof createCarReportService>;
