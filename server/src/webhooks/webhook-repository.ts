/**
 * SQL for webhooks: the endpoints, the events written for them, each event's delivery to each
 * endpoint and each delivery's attempts.
 */

import type { Db } from '../store/db.ts';
import type { Sealed } from '../store/key-encryption.ts';

export interface EndpointRow {
  id: string;
  account_id: string;
  url: string;
  description: string;
  events: string[];
  enabled: boolean;
  disabled_reason: 'failing' | 'owner' | null;
  disabled_at: Date | null;
  failing_since: Date | null;
  secret_ciphertext: string;
  secret_key_id: string;
  secret_algorithm: string;
  previous_secret_ciphertext: string | null;
  previous_secret_key_id: string | null;
  previous_secret_algorithm: string | null;
  previous_secret_expires_at: Date | null;
  claimed_by: string | null;
  claimed_until: Date | null;
  created_at: Date;
  updated_at: Date;
}

export type DeliveryState = 'pending' | 'delivered' | 'failed';

export interface DeliveryRow {
  id: string;
  endpoint_id: string;
  event_id: string;
  state: DeliveryState;
  attempts: number;
  next_attempt_at: Date | null;
  created_at: Date;
}

/** A delivery with what its attempts send: the event's type and body. */
export interface DueDelivery extends DeliveryRow {
  event_type: string;
  body: string;
}

export interface AttemptRow {
  delivery_id: string;
  attempted_at: Date;
  status: number | null;
  duration_ms: number;
  response: string;
  error: string | null;
}

export interface EventRow {
  id: string;
  type: string;
  account_id: string;
  body: string;
  occurred_at: Date;
}

function endpointFromDb(row: EndpointRow): EndpointRow {
  return typeof row.events === 'string' ? { ...row, events: JSON.parse(row.events) } : row;
}

/** The sealed secret as the endpoint's columns keep it (`previous`: the one a rotation left signing). */
export function secretColumns(sealed: Sealed, which: 'secret' | 'previous_secret') {
  return {
    [`${which}_ciphertext`]: sealed.ciphertext,
    [`${which}_key_id`]: sealed.keyId,
    [`${which}_algorithm`]: sealed.algorithm,
  };
}

export function sealedSecret(row: EndpointRow, which: 'secret' | 'previous_secret'): Sealed | undefined {
  const record = row as unknown as Record<string, string | null>;
  const ciphertext = record[`${which}_ciphertext`];
  const keyId = record[`${which}_key_id`];
  const algorithm = record[`${which}_algorithm`];
  return ciphertext && keyId && algorithm ? { ciphertext, keyId, algorithm } : undefined;
}

export async function insertEndpoint(db: Db, row: Omit<EndpointRow, 'claimed_by' | 'claimed_until'>) {
  const [inserted] = await db('webhook_endpoints')
    .insert({ ...row, events: JSON.stringify(row.events) })
    .returning('*');
  return endpointFromDb(inserted as EndpointRow);
}

export async function countEndpointsOf(db: Db, accountId: string): Promise<number> {
  const [row] = await db('webhook_endpoints').where({ account_id: accountId }).count({ n: '*' });
  return Number(row?.n ?? 0);
}

export async function listEndpointsOf(db: Db, accountId: string): Promise<EndpointRow[]> {
  const rows = await db<EndpointRow>('webhook_endpoints')
    .where({ account_id: accountId })
    .orderBy([{ column: 'created_at' }, { column: 'id' }]);
  return rows.map(endpointFromDb);
}

/** The endpoint, when it is `accountId`'s (`lock`: held until the transaction ends). */
export async function findEndpointOf(
  db: Db,
  accountId: string,
  id: string,
  options: { lock?: boolean } = {},
): Promise<EndpointRow | undefined> {
  const query = db<EndpointRow>('webhook_endpoints').where({ id, account_id: accountId }).first();
  if (options.lock) query.forUpdate();
  const row = await query;
  return row && endpointFromDb(row);
}

export async function findEndpoint(db: Db, id: string): Promise<EndpointRow | undefined> {
  const row = await db<EndpointRow>('webhook_endpoints').where({ id }).first();
  return row && endpointFromDb(row);
}

export async function updateEndpoint(
  db: Db,
  id: string,
  changes: Partial<Omit<EndpointRow, 'id' | 'account_id' | 'events'>> & { events?: string[] },
): Promise<EndpointRow> {
  const { events, ...rest } = changes;
  const [row] = await db('webhook_endpoints')
    .where({ id })
    .update({ ...rest, ...(events ? { events: JSON.stringify(events) } : {}) })
    .returning('*');
  return endpointFromDb(row as EndpointRow);
}

export async function deleteEndpoint(db: Db, accountId: string, id: string): Promise<boolean> {
  // The ids deleted, not a count: on PGlite knex answers a delete with the raw result, not a number.
  const deleted = await db('webhook_endpoints').where({ id, account_id: accountId }).delete().returning('id');
  return deleted.length > 0;
}

/**
 * Who an event is for: an account; the owner of a car (now); the owner of a command's car, when
 * they paired it before the command was made (an earlier owner's commands are theirs alone, as
 * `GET …/commands` has it); or the developer of an app.
 */
export type Audience =
  | { accountId: string }
  | { ownerOfCar: string }
  | { ownerOfCommand: string }
  | { developerOfApp: string };

function audienceParts(audience: Audience): [kind: string, key: string] {
  if ('accountId' in audience) return ['account', audience.accountId];
  if ('ownerOfCar' in audience) return ['car', audience.ownerOfCar];
  if ('ownerOfCommand' in audience) return ['command', audience.ownerOfCommand];
  return ['app', audience.developerOfApp];
}

/**
 * The enabled endpoints that want each of `wanted` (an event type for an audience), in one
 * statement whatever their number: `index` is the position in `wanted`. An event whose audience
 * has no such endpoint (no owner, no endpoint, another type) has no row.
 */
export async function findListeningEndpoints(
  db: Db,
  wanted: readonly { type: string; audience: Audience }[],
): Promise<{ index: number; endpoint_id: string; account_id: string }[]> {
  const parts = wanted.map((w) => audienceParts(w.audience));
  const { rows } = await db.raw(
    `select w.index, e.id as endpoint_id, e.account_id
     from unnest(?::int[], ?::text[], ?::text[], ?::text[]) as w(index, type, kind, key)
     join lateral (
       select case w.kind
         when 'account' then w.key::uuid
         when 'car' then (select owner_id from cars where device_id = w.key)
         when 'command' then (
           select car.owner_id from car_commands command
           join cars car on car.device_id = command.device_id
           where command.command_id = w.key::uuid and car.paired_at <= command.created_at
         )
         when 'app' then (select owner_id from mini_apps where id = w.key)
       end as account_id
     ) audience on true
     join webhook_endpoints e
       on e.account_id = audience.account_id and e.enabled and e.events @> jsonb_build_array(w.type)
     order by w.index, e.id`,
    [
      wanted.map((_, index) => index),
      wanted.map((w) => w.type),
      parts.map(([kind]) => kind),
      parts.map(([, key]) => key),
    ],
  );
  return rows as { index: number; endpoint_id: string; account_id: string }[];
}

/** The event types some enabled endpoint lists. */
export async function listenedEventTypes(db: Db): Promise<string[]> {
  const { rows } = await db.raw(
    'select distinct jsonb_array_elements_text(events) as type from webhook_endpoints where enabled',
  );
  return (rows as { type: string }[]).map((row) => row.type);
}

export async function insertEvents(db: Db, rows: readonly EventRow[]): Promise<void> {
  if (rows.length > 0) await db('webhook_events').insert(rows);
}

export async function insertDeliveries(db: Db, rows: readonly DeliveryRow[]): Promise<DeliveryRow[]> {
  if (rows.length === 0) return [];
  return (await db('webhook_deliveries').insert(rows).returning('*')) as DeliveryRow[];
}

/**
 * Claims one enabled endpoint that has a delivery due and no live claim, until `until`: one
 * replica delivers to an endpoint at a time, so its first attempts go in the events' order.
 */
export async function claimEndpoint(
  db: Db,
  claim: { claimant: string; now: Date; until: Date },
): Promise<EndpointRow | undefined> {
  const { rows } = await db.raw(
    `update webhook_endpoints e set claimed_by = ?, claimed_until = ?
     from (
       select id from webhook_endpoints candidate
       where enabled and (claimed_until is null or claimed_until <= ?)
         and exists (
           select 1 from webhook_deliveries d
           where d.endpoint_id = candidate.id and d.state = 'pending' and d.next_attempt_at <= ?
         )
       order by claimed_until nulls first
       limit 1
       for update skip locked
     ) due
     where e.id = due.id
     returning e.*`,
    [claim.claimant, claim.until, claim.now, claim.now],
  );
  const [row] = rows as EndpointRow[];
  return row && endpointFromDb(row);
}

/**
 * An endpoint enabled again: its pending deliveries fall due now rather than at the retry their
 * last failure scheduled (up to a day away), and go out at once.
 */
export async function resumePendingDeliveries(db: Db, endpointId: string, now: Date): Promise<void> {
  await db('webhook_deliveries')
    .where({ endpoint_id: endpointId, state: 'pending' })
    .andWhere('next_attempt_at', '>', now)
    .update({ next_attempt_at: now });
}

/** A pending delivery falls due now (its owner asked to deliver it again). */
export async function deliverNow(db: Db, deliveryId: string, now: Date): Promise<void> {
  await db('webhook_deliveries').where({ id: deliveryId, state: 'pending' }).update({ next_attempt_at: now });
}

/** Keeps the claim while deliveries go on; false when it lapsed and another took it. */
export async function renewClaim(
  db: Db,
  endpointId: string,
  claimant: string,
  until: Date,
): Promise<boolean> {
  const changed = await db('webhook_endpoints')
    .where({ id: endpointId, claimed_by: claimant })
    .update({ claimed_until: until });
  return changed > 0;
}

export async function releaseClaim(db: Db, endpointId: string, claimant: string): Promise<void> {
  await db('webhook_endpoints')
    .where({ id: endpointId, claimed_by: claimant })
    .update({ claimed_by: null, claimed_until: null });
}

/** The endpoint's deliveries due at `now`, in the order their events happened. */
export async function dueDeliveries(
  db: Db,
  endpointId: string,
  now: Date,
  limit: number,
): Promise<DueDelivery[]> {
  return (await db('webhook_deliveries as d')
    .join('webhook_events as ev', 'ev.id', 'd.event_id')
    .where('d.endpoint_id', endpointId)
    .andWhere('d.state', 'pending')
    .andWhere('d.next_attempt_at', '<=', now)
    .orderBy('d.position')
    .limit(limit)
    .select('d.*', 'ev.type as event_type', 'ev.body')) as DueDelivery[];
}

/** When the next delivery of an enabled endpoint is due; undefined when none is pending. */
export async function nextDueAt(db: Db): Promise<Date | undefined> {
  const row = await db('webhook_deliveries as d')
    .join('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
    .where('d.state', 'pending')
    .andWhere('e.enabled', true)
    .min({ at: 'd.next_attempt_at' })
    .first();
  return row?.at ? new Date(row.at) : undefined;
}

export async function insertAttempt(db: Db, row: AttemptRow): Promise<void> {
  await db('webhook_attempts').insert(row);
}

export async function updateDelivery(
  db: Db,
  id: string,
  changes: Pick<DeliveryRow, 'state' | 'attempts' | 'next_attempt_at'>,
): Promise<void> {
  await db('webhook_deliveries').where({ id }).update(changes);
}

/** Newest first, `limit + 1` rows so the caller knows whether another page follows. */
export async function listDeliveries(
  db: Db,
  endpointId: string,
  limit: number,
  after?: { at: Date; id: string },
): Promise<(DeliveryRow & { event_type: string })[]> {
  const query = db('webhook_deliveries as d')
    .join('webhook_events as ev', 'ev.id', 'd.event_id')
    .where('d.endpoint_id', endpointId)
    .orderBy([
      { column: 'd.created_at', order: 'desc' },
      { column: 'd.id', order: 'desc' },
    ])
    .limit(limit + 1)
    .select('d.*', 'ev.type as event_type');
  if (after) {
    query.andWhere((older) =>
      older
        .where('d.created_at', '<', after.at)
        .orWhere((same) => same.where('d.created_at', '=', after.at).andWhere('d.id', '<', after.id)),
    );
  }
  return (await query) as (DeliveryRow & { event_type: string })[];
}

export async function findDelivery(
  db: Db,
  endpointId: string,
  id: string,
): Promise<(DeliveryRow & { event_type: string }) | undefined> {
  return (await db('webhook_deliveries as d')
    .join('webhook_events as ev', 'ev.id', 'd.event_id')
    .where({ 'd.id': id, 'd.endpoint_id': endpointId })
    .first('d.*', 'ev.type as event_type')) as (DeliveryRow & { event_type: string }) | undefined;
}

/** The attempts of the deliveries named, newest first. */
export async function attemptsOf(db: Db, deliveryIds: readonly string[]): Promise<AttemptRow[]> {
  if (deliveryIds.length === 0) return [];
  return (await db('webhook_attempts')
    .whereIn('delivery_id', deliveryIds)
    .orderBy('attempted_at', 'desc')) as AttemptRow[];
}

/** Events older than `before`, with their deliveries and attempts, are deleted (the log keeps 30 days). */
export async function deleteEventsBefore(db: Db, before: Date): Promise<number> {
  return db('webhook_events').where('occurred_at', '<', before).delete();
}

/** The endpoints with a secret sealed with another key-encryption key than `keyId` (a rotation). */
export async function listEndpointsSealedWithOtherKeys(db: Db, keyId: string): Promise<EndpointRow[]> {
  const rows = await db<EndpointRow>('webhook_endpoints')
    .whereNot({ secret_key_id: keyId })
    .orWhere((previous) =>
      previous.whereNotNull('previous_secret_key_id').andWhereNot({ previous_secret_key_id: keyId }),
    );
  return rows.map(endpointFromDb);
}
