/**
 * Events for webhooks, written in the transaction of the change they tell of (a review move, a
 * rollout move, a command's move, a car's presence): the event and one pending delivery per
 * endpoint that wants it, so that a change that commits is delivered at least once and one that
 * rolls back never is. The deliverer is woken once the transaction commits: this process's at
 * once, and on Postgres every replica's through a `NOTIFY` sent in the same transaction.
 *
 * Each process keeps the event types some enabled endpoint lists (refreshed when an endpoint
 * changes, here at once and on other replicas by `NOTIFY`, and every 10 s whatever happens): an
 * event of a type nobody listens to costs nothing, not even a read, so a fleet without webhooks
 * keeps its commands' one-statement moves (bench:commands). Otherwise the event costs one read
 * (the endpoints that want it) and its payload is built only when someone does.
 */
import { randomUUID } from 'node:crypto';
import type { components } from '../../../generated/openapi.ts';
import type { Clock } from '../clock.ts';
import type { Logger } from '../logger.ts';
import { afterCommit } from '../store/after-commit.ts';
import type { Db } from '../store/db.ts';
import { hasNotifications, type Listening, listen, notify } from '../store/notifications.ts';
import {
  type Audience,
  type DeliveryRow,
  type EventRow,
  findListeningEndpoints,
  insertDeliveries,
  insertEvents,
  listenedEventTypes,
} from './webhook-repository.ts';

export type WebhookEventType = components['schemas']['WebhookEventType'];
export type { Audience };

/** The channel on which a replica that wrote deliveries tells the others (store/notifications.ts). */
export const webhooksChannel = 'svc_webhooks';

/** The channel on which a replica that changed an endpoint tells the others to read the types again. */
const endpointsChannel = 'svc_webhook_endpoints';

/** How often the listened types are read again, whatever notifications say. */
const listenedRefreshMs = 10_000;

export interface NewWebhookEvent {
  type: WebhookEventType;
  audience: Audience;
  /** When it happened: the payload's `timestamp`. */
  at: Date;
  /** The payload's `data`, built only when an endpoint wants the event. */
  data: () => unknown | Promise<unknown>;
}

/** `evt_` and 32 hex digits: the event's id, sent as `webhook-id`. */
function newEventId(): string {
  return `evt_${randomUUID().replaceAll('-', '')}`;
}

export function createWebhookEvents(deps: { db: Db; clock: Clock }) {
  const { db, clock } = deps;
  /** Says which notifications this process sent itself (it has woken its own deliverer already). */
  const instance = randomUUID();
  const notifies = hasNotifications(db);
  const listeners = new Set<() => void>();
  /** The types some enabled endpoint lists; undefined until read: every type counts as listened to. */
  let listened: Set<string> | undefined;
  /** Moves on with every endpoint change here, so that a read begun before it is not taken. */
  let generation = 0;
  let refreshTimer: NodeJS.Timeout | undefined;
  let endpointNews: Listening | undefined;

  async function readListened(): Promise<void> {
    const begun = generation;
    const types = await listenedEventTypes(db);
    if (begun === generation) listened = new Set(types);
  }

  /** Whether some enabled endpoint lists `type` (as far as this process knows: see above). */
  function listens(type: WebhookEventType): boolean {
    return listened === undefined || listened.has(type);
  }

  function refreshSoon(): void {
    void readListened().catch(() => {
      listened = undefined;
    });
  }

  /** The event and its deliveries, inside `trx` (the caller wakes the deliverers). */
  async function write(trx: Db, event: EventRow, endpointIds: readonly string[]): Promise<DeliveryRow[]> {
    await insertEvents(trx, [event]);
    const now = clock();
    const deliveries = await insertDeliveries(
      trx,
      endpointIds.map((endpointId) => ({
        id: randomUUID(),
        endpoint_id: endpointId,
        event_id: event.id,
        state: 'pending',
        attempts: 0,
        next_attempt_at: now,
        created_at: now,
      })),
    );
    return deliveries;
  }

  async function woken(trx: Db): Promise<void> {
    if (notifies) await notify(trx, webhooksChannel, instance);
    afterCommit(trx, () => {
      for (const wake of listeners) wake();
    });
  }

  function bodyOf(type: string, at: Date, data: unknown): string {
    return JSON.stringify({ type, timestamp: at.toISOString(), data });
  }

  return {
    instance,

    /** Calls `wake` whenever this process wrote deliveries, once they are committed. */
    onDeliveriesWritten(wake: () => void): () => void {
      listeners.add(wake);
      return () => listeners.delete(wake);
    },

    listens,

    /** Reads the listened types, and keeps them fresh until `stop`. */
    async start(logger: Logger): Promise<void> {
      await readListened();
      refreshTimer = setInterval(refreshSoon, listenedRefreshMs);
      refreshTimer.unref();
      if (notifies) endpointNews = listen(db, endpointsChannel, refreshSoon, logger);
    },

    async stop(): Promise<void> {
      clearInterval(refreshTimer);
      await endpointNews?.close();
    },

    /**
     * An endpoint changed inside `trx`, and now lists `types` (none when removed or disabled):
     * once it commits, this process counts them at once (before it answers the change), and every
     * process reads the listened types again.
     */
    async endpointsChanged(trx: Db, types: readonly string[] = []): Promise<void> {
      if (notifies) await notify(trx, endpointsChannel, instance);
      afterCommit(trx, () => {
        generation += 1;
        for (const type of types) listened?.add(type);
        refreshSoon();
      });
    },

    /** Writes each event for the endpoints of its audience that want its type, inside `trx`. */
    async record(trx: Db, all: readonly NewWebhookEvent[]): Promise<void> {
      const events = all.filter((event) => listens(event.type));
      if (events.length === 0) return;
      const listening = await findListeningEndpoints(trx, events);
      if (listening.length === 0) return;
      const byEvent = new Map<number, { accountId: string; endpointIds: string[] }>();
      for (const row of listening) {
        const entry = byEvent.get(row.index) ?? { accountId: row.account_id, endpointIds: [] };
        entry.endpointIds.push(row.endpoint_id);
        byEvent.set(row.index, entry);
      }
      for (const [index, { accountId, endpointIds }] of byEvent) {
        const event = events[index] as NewWebhookEvent;
        const row: EventRow = {
          id: newEventId(),
          type: event.type,
          account_id: accountId,
          body: bodyOf(event.type, event.at, await event.data()),
          occurred_at: event.at,
        };
        await write(trx, row, endpointIds);
      }
      await woken(trx);
    },

    /** One event for one endpoint, whatever types it lists (a test ping). */
    async recordFor(
      trx: Db,
      endpoint: { id: string; account_id: string },
      type: WebhookEventType,
      data: unknown,
    ): Promise<DeliveryRow> {
      const at = clock();
      const event = {
        id: newEventId(),
        type,
        account_id: endpoint.account_id,
        body: bodyOf(type, at, data),
        occurred_at: at,
      };
      const [delivery] = await write(trx, event, [endpoint.id]);
      await woken(trx);
      return delivery as DeliveryRow;
    },

    /** Deliveries pending for an endpoint enabled again inside `trx` go out once it commits. */
    pendingResumed: woken,

    /** The event once more for the endpoint, as a new delivery with the same event id. */
    async redeliver(trx: Db, endpointId: string, eventId: string): Promise<DeliveryRow> {
      const now = clock();
      const [delivery] = await insertDeliveries(trx, [
        {
          id: randomUUID(),
          endpoint_id: endpointId,
          event_id: eventId,
          state: 'pending',
          attempts: 0,
          next_attempt_at: now,
          created_at: now,
        },
      ]);
      await woken(trx);
      return delivery as DeliveryRow;
    },
  };
}

export type WebhookEvents = ReturnType<typeof createWebhookEvents>;
