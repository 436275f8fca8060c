/**
 * How many cars this replica counts as connected (`svc_mqtt_connected_cars`), chosen so that a sum
 * over the replicas is the fleet's number, never N times it.
 *
 * Embedded broker: each replica's broker holds its own cars' connections, so each counts the cars
 * signed in to it, and no car is in two. Mosquitto: no replica holds a connection, and with shared
 * subscriptions no replica sees every car's presence either; the store does (`car_presence`). So
 * one replica at a time reports the store's count and the others 0: the one holding a lease in the
 * key-value table, renewed at each scrape and taken over by another once it lapses (a replica gone
 * for good). A handover may count the fleet twice, or not at all, for one scrape interval.
 */

import type { Db } from '../store/db.ts';
import { countOnlineCars } from './car-report-repository.ts';

const leaseKey = 'metrics:connected-cars';
/** Longer than any usual scrape interval, so that the reporter stays put between scrapes. */
export const connectedCarsLeaseSeconds = 120;

/** Whether `replicaId` holds (or just took) the lease of reporting the store's count. */
async function holdsLease(db: Db, replicaId: string): Promise<boolean> {
  const { rows } = await db.raw(
    `insert into key_values (key, value, updated_at) values (?, ?, now())
     on conflict (key) do update set value = excluded.value, updated_at = excluded.updated_at
     where key_values.value = excluded.value
        or key_values.updated_at < now() - make_interval(secs => ?)
     returning value`,
    [leaseKey, replicaId, connectedCarsLeaseSeconds],
  );
  return rows.length > 0;
}

export function connectedCarsOfReplica(
  deps:
    | { broker: 'embedded'; signedInCars: () => number }
    /** Mosquitto: a broker outside this process. */
    | { broker: 'external'; db: Db; replicaId: string },
): () => Promise<number> {
  if (deps.broker === 'embedded') return async () => deps.signedInCars();
  return async () => ((await holdsLease(deps.db, deps.replicaId)) ? countOnlineCars(deps.db) : 0);
}
