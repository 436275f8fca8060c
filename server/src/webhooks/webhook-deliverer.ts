/**
 * Delivers the pending webhook deliveries: one endpoint at a time per claim, its deliveries in the
 * order their events happened, each attempt signed with the endpoint's secrets, bounded in time
 * and in the answer read, and logged. A failed attempt is tried again after the next delay of
 * {@link retryDelaysMs} (about three days in all), and an endpoint whose every attempt failed for
 * `disableAfterSeconds` is disabled.
 *
 * Woken when deliveries are written (here at once, from other replicas by `NOTIFY`), when a retry
 * falls due (a timer for the earliest), and by the scheduler's sweep, which catches what a wake-up
 * missed. A replica that dies holding an endpoint's claim lets it go when the claim lapses; what
 * it was sending is sent again (at least once: receivers drop an id they have had).
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../clock.ts';
import type { Logger } from '../logger.ts';
import { afterCommit } from '../store/after-commit.ts';
import type { Db } from '../store/db.ts';
import type { KeyRing } from '../store/key-encryption.ts';
import { hasNotifications, type Listening, listen } from '../store/notifications.ts';
import { type WebhookEvents, webhooksChannel } from './webhook-events.ts';
import type { WebhookMetrics } from './webhook-metrics.ts';
import {
  claimEndpoint,
  type DueDelivery,
  dueDeliveries,
  type EndpointRow,
  insertAttempt,
  nextDueAt,
  releaseClaim,
  renewClaim,
  updateDelivery,
  updateEndpoint,
} from './webhook-repository.ts';
import { endpointSecrets } from './webhook-secrets.ts';
import type { AttemptResult, WebhookSender } from './webhook-sender.ts';
import { webhookHeaders } from './webhook-signature.ts';

const second = 1000;
const minute = 60 * second;
const hour = 60 * minute;

/**
 * After the first attempt fails, the next ones wait this long each (the Standard Webhooks
 * schedule, stretched to three days as Stripe's is): ten attempts over 3 days 3 h 35 min.
 */
export const retryDelaysMs = [
  5 * second,
  5 * minute,
  30 * minute,
  2 * hour,
  5 * hour,
  10 * hour,
  10 * hour,
  24 * hour,
  24 * hour,
];

/** The answer's first bytes kept in the log. */
export const loggedResponseBytes = 1024;

/** Endpoints delivered to at once by one replica. */
const parallelEndpoints = 4;

/** Deliveries read at a time for one endpoint. */
const batchSize = 20;

/** The longest the deliverer sleeps without looking (a retry another replica scheduled). */
const longestSleepMs = 30 * second;

export function createWebhookDeliverer(deps: {
  db: Db;
  clock: Clock;
  logger: Logger;
  keyRing: KeyRing;
  events: WebhookEvents;
  sender: WebhookSender;
  timeoutMs: number;
  disableAfterSeconds: number;
  metrics?: WebhookMetrics;
}) {
  const { db, clock, logger, events, sender } = deps;
  /** A claim outlives an attempt, and lapses soon after a replica that died. */
  const claimMs = deps.timeoutMs * 3;
  const claimant = randomUUID();

  let stopped = false;
  /** The lanes delivering now, each to one endpoint at a time. */
  const lanes = new Set<Promise<void>>();
  /** Counts wake-ups, so that a lane finding nothing knows whether work came since it looked. */
  let wakes = 0;
  let timer: NodeJS.Timeout | undefined;
  let listening: Listening | undefined;
  let stopListeningHere: (() => void) | undefined;

  /** The delivery's state after an attempt at `at` with `result`. */
  function afterAttempt(delivery: DueDelivery, result: AttemptResult, at: Date) {
    const attempts = delivery.attempts + 1;
    if (result.outcome === 'delivered')
      return { state: 'delivered' as const, attempts, next_attempt_at: null };
    const delay = retryDelaysMs[attempts - 1];
    if (delay === undefined) return { state: 'failed' as const, attempts, next_attempt_at: null };
    return { state: 'pending' as const, attempts, next_attempt_at: new Date(at.getTime() + delay) };
  }

  /** Records the attempt, moves the delivery, and keeps the endpoint's failing streak; the endpoint after. */
  async function record(
    endpoint: EndpointRow,
    delivery: DueDelivery,
    result: AttemptResult,
    at: Date,
  ): Promise<EndpointRow> {
    return db.transaction(async (trx) => {
      await insertAttempt(trx, {
        delivery_id: delivery.id,
        attempted_at: at,
        status: result.status ?? null,
        duration_ms: Math.round(result.durationMs),
        response: result.response.slice(0, loggedResponseBytes),
        error: result.outcome === 'delivered' ? null : (result.error ?? 'status'),
      });
      await updateDelivery(trx, delivery.id, afterAttempt(delivery, result, at));
      if (result.outcome === 'delivered') {
        return endpoint.failing_since === null
          ? endpoint
          : updateEndpoint(trx, endpoint.id, { failing_since: null });
      }
      const failingSince = endpoint.failing_since ?? at;
      const failingFor = at.getTime() - failingSince.getTime();
      if (failingFor >= deps.disableAfterSeconds * 1000) {
        afterCommit(trx, () => deps.metrics?.disabled());
        await events.endpointsChanged(trx);
        logger.warn('webhooks: endpoint disabled after failing', {
          webhookId: endpoint.id,
          failingSince: failingSince.toISOString(),
        });
        return updateEndpoint(trx, endpoint.id, {
          failing_since: failingSince,
          enabled: false,
          disabled_reason: 'failing',
          disabled_at: at,
          updated_at: at,
        });
      }
      return endpoint.failing_since === null
        ? updateEndpoint(trx, endpoint.id, { failing_since: failingSince })
        : endpoint;
    });
  }

  /** Delivers what is due to the claimed endpoint, in order, until nothing is or the claim is lost. */
  async function deliverTo(claimed: EndpointRow): Promise<void> {
    let endpoint = claimed;
    try {
      for (;;) {
        const due = await dueDeliveries(db, endpoint.id, clock(), batchSize);
        for (const delivery of due) {
          if (stopped || !endpoint.enabled) return;
          const at = clock();
          if (!(await renewClaim(db, endpoint.id, claimant, new Date(at.getTime() + claimMs)))) return;
          const timestamp = Math.floor(at.getTime() / 1000);
          const result = await sender.send({
            url: endpoint.url,
            body: delivery.body,
            headers: webhookHeaders({
              id: delivery.event_id,
              timestamp,
              body: delivery.body,
              secrets: endpointSecrets(endpoint, deps.keyRing, at),
            }),
          });
          deps.metrics?.attempted(result);
          endpoint = await record(endpoint, delivery, result, at);
        }
        if (due.length < batchSize) return;
      }
    } finally {
      await releaseClaim(db, endpoint.id, claimant).catch(() => {});
    }
  }

  /**
   * One lane: claims an endpoint with something due and delivers to it, then the next, until none
   * is left and no wake-up came since it last looked. Lanes are independent, so an endpoint that
   * hangs until its timeout holds up its own deliveries only.
   */
  async function lane(): Promise<void> {
    for (;;) {
      if (stopped) return;
      const seen = wakes;
      const now = clock();
      const endpoint = await claimEndpoint(db, {
        claimant,
        now,
        until: new Date(now.getTime() + claimMs),
      });
      if (endpoint) await deliverTo(endpoint);
      else if (seen === wakes) return;
    }
  }

  /** Sleeps until the earliest pending retry (or the longest sleep), unless woken first. */
  async function sleepUntilNextDue(): Promise<void> {
    if (stopped) return;
    const next = await nextDueAt(db);
    const waitMs = next ? Math.max(0, next.getTime() - clock().getTime()) : longestSleepMs;
    clearTimeout(timer);
    timer = setTimeout(wake, Math.min(waitMs, longestSleepMs) + 10);
    timer.unref();
  }

  function laneEnded(error?: unknown): void {
    if (error !== undefined) {
      logger.warn('webhooks: delivering failed for now; trying again shortly', {
        error: error instanceof Error ? error.message : String(error),
      });
      clearTimeout(timer);
      timer = setTimeout(wake, 5 * second);
      timer.unref();
      return;
    }
    if (lanes.size === 0) void sleepUntilNextDue().catch(() => {});
  }

  /** Work may be due: a lane more looks, unless every lane is busy (each looks again when done). */
  function wake(): void {
    if (stopped) return;
    wakes += 1;
    if (lanes.size >= parallelEndpoints) return;
    const running: Promise<void> = lane().then(
      () => {
        lanes.delete(running);
        laneEnded();
      },
      (error: unknown) => {
        lanes.delete(running);
        laneEnded(error);
      },
    );
    lanes.add(running);
  }

  /** Resolves once no lane is delivering. */
  async function idle(): Promise<void> {
    while (lanes.size > 0) await Promise.all(lanes);
  }

  return {
    /**
     * Delivers everything due now and resolves when it is done (tests on a controlled clock call
     * this after moving it; the service is woken instead).
     */
    async deliverDue(): Promise<void> {
      wake();
      await idle();
    },

    /** What a wake-up missed; the scheduler runs it. */
    sweep(): void {
      wake();
    },

    start(): void {
      stopListeningHere = events.onDeliveriesWritten(wake);
      if (hasNotifications(db)) {
        listening = listen(
          db,
          webhooksChannel,
          (sender) => {
            if (sender !== events.instance) wake();
          },
          logger,
        );
      }
      wake();
    },

    /** Stops delivering; an attempt in flight is let finish (bounded by its timeout). */
    async stop(): Promise<void> {
      stopped = true;
      clearTimeout(timer);
      stopListeningHere?.();
      await Promise.all([idle(), listening?.close()]);
    },
  };
}

export type WebhookDeliverer = ReturnType<typeof createWebhookDeliverer>;
