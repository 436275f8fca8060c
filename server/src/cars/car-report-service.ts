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
import { createGroupWrite } from '../store/group-write.ts';
import type { WebhookEvents } from '../webhooks/webhook-events.ts';
import {
  findCarLocation,
  findCarStatus,
  lockPresence,
  type PresenceWrite,
  type Sighting,
  type StatusReport,
  type StatusWritten,
  savePresences,
  saveSightings,
  saveStatusReports,
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

/** More than the bridge ever has in hand at once (one message per connection): a bound, not a setting. */
const maxGroupWrite = 500;

export function createCarReportService(deps: { db: Db; webhookEvents?: WebhookEvents }) {
  const { db, webhookEvents } = deps;

  // Status and presence are written in groups (store/group-write.ts): what arrives on the bridge's
  // connections while one write is on its way goes in the next, so that the store's round trip no
  // longer paces every car's stream.
  const statusWrites = createGroupWrite(
    (writes: { report: StatusReport; seenAt: Date | undefined }[]) => saveStatusReports(db, writes),
    { maxItems: maxGroupWrite, key: (write) => write.report.deviceId },
  );
  const sightings = createGroupWrite((seen: Sighting[]) => saveSightings(db, seen), {
    maxItems: maxGroupWrite,
    key: (sighting) => sighting.deviceId,
  });
  const presenceWrites = createGroupWrite(writePresences, {
    maxItems: maxGroupWrite,
    key: (write) => write.deviceId,
  });

  /**
   * Without an endpoint to tell, one statement for the group (webhook-events.ts). With one, each
   * message in its order within one transaction, each car's row locked, so that every change of
   * presence is told, a quick reconnection too.
   */
  function writePresences(writes: PresenceWrite[]): Promise<(boolean | undefined)[]> {
    if (!webhookEvents?.listens('car.online') && !webhookEvents?.listens('car.offline')) {
      return savePresences(db, writes);
    }
    return db.transaction(async (trx) => {
      const online: (boolean | undefined)[] = [];
      for (const write of writes) {
        const wasOnline = await lockPresence(trx, write.deviceId);
        const [now] = await savePresences(trx, [write]);
        online.push(now);
        if (now === undefined) continue;
        await presenceChanged(trx, webhookEvents, {
          deviceId: write.deviceId,
          wasOnline,
          online: now,
          at: write.at,
        });
      }
      return online;
    });
  }

  return {
    /**
     * The car's report replaces the one kept unless that one is newer (by the car's `reported_at`);
     * a live one (`seenAt`) moves its last seen. Resolves once the write that took it committed.
     */
    saveStatus(report: StatusReport, seenAt: Date | undefined): Promise<StatusWritten> {
      return statusWrites.add({ report, seenAt });
    },

    /**
     * Online or offline, as the car's newest presence message says (by its `at`); `seenAt` as above.
     * False when no such car is provisioned. Resolves once the write that took it committed.
     */
    async savePresence(
      presence: { deviceId: string; online: boolean; at: string },
      seenAt: Date | undefined,
    ): Promise<boolean> {
      return (await presenceWrites.add({ ...presence, seenAt })) !== undefined;
    },

    /**
     * The car was heard from, at `seenAt` for a live message (undefined for a retained replay):
     * its last seen moves forward, never back. False when no such car is provisioned.
     */
    sighted(deviceId: string, seenAt: Date | undefined): Promise<boolean> {
      return sightings.add({ deviceId, seenAt });
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
