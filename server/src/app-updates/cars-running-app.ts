/**
 * The cars that run an app, as the app updater and a rollout's progress read them: the version
 * each car last reported (`car_status_reports`), whether it is online (`car_presence`), and its
 * latest `app.install` of the app (`car_commands`). A read across the cars' and the commands'
 * tables, for this one view; every write goes through their own folders.
 */
import type { CommandState } from '../commands/command-states.ts';
import type { Db } from '../store/db.ts';

export interface CarRunningApp {
  device_id: string;
  online: boolean;
  /** As the car last reported it, and when that report came. */
  installed_version: string;
  reported_at: Date;
  /** The car's latest `app.install` of the app, if any. */
  command_id: string | null;
  command_version: string | null;
  command_state: CommandState | null;
  command_updated_at: Date | null;
}

export async function carsRunningApp(
  db: Db,
  appId: string,
  options: { deviceId?: string } = {},
): Promise<CarRunningApp[]> {
  const result = await db.raw(
    `select r.device_id,
            coalesce(p.online, false) as online,
            (select a->>'version' from jsonb_array_elements(r.installed_apps) a
              where a->>'app_id' = :appId limit 1) as installed_version,
            r.received_at as reported_at,
            c.command_id, c.args->>'version' as command_version, c.state as command_state,
            c.updated_at as command_updated_at
       from car_status_reports r
       left join car_presence p on p.device_id = r.device_id
       left join lateral (
         select command_id, args, state, updated_at from car_commands
          where name = 'app.install' and args->>'app_id' = :appId and device_id = r.device_id
          order by created_at desc, command_id
          limit 1
       ) c on true
      where r.installed_apps @> cast(:running as jsonb)
        ${options.deviceId ? 'and r.device_id = :deviceId' : ''}
      order by r.device_id`,
    { appId, running: JSON.stringify([{ app_id: appId }]), deviceId: options.deviceId ?? null },
  );
  return (result.rows as CarRunningApp[]).filter((row) => typeof row.installed_version === 'string');
}

/** The apps the cars last reported running. */
export async function appsOfCars(db: Db, deviceIds: readonly string[]): Promise<string[]> {
  if (deviceIds.length === 0) return [];
  const result = await db.raw(
    `select distinct a->>'app_id' as app_id
       from car_status_reports r, jsonb_array_elements(r.installed_apps) a
      where r.device_id in (${deviceIds.map(() => '?').join(', ')})`,
    [...deviceIds],
  );
  return (result.rows as { app_id: string | null }[]).flatMap((row) => (row.app_id ? [row.app_id] : []));
}
