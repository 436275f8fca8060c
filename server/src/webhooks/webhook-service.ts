/**
 * An account's webhook endpoints: register (the secret shown once), list, change, remove, rotate
 * the secret with an overlap, send a test ping, read the delivery log and deliver one event again.
 * An endpoint is its account's alone: anyone else is answered 404, as if it did not exist.
 */
import { randomUUID } from 'node:crypto';
import { isUuid } from '@svc/sdk';
import type { components } from '../../../generated/openapi.ts';
import type { Principal } from '../auth/principal.ts';
import type { Clock } from '../clock.ts';
import { ConflictError, InvalidError, NotFoundError } from '../errors.ts';
import { decodePageCursor, encodePageCursor } from '../page-cursor.ts';
import type { Db } from '../store/db.ts';
import type { KeyRing } from '../store/key-encryption.ts';
import type { WebhookEvents } from './webhook-events.ts';
import {
  type AttemptRow,
  attemptsOf,
  countEndpointsOf,
  type DeliveryRow,
  deleteEndpoint,
  deleteEventsBefore,
  deliverNow,
  type EndpointRow,
  findDelivery,
  findEndpointOf,
  insertEndpoint,
  listDeliveries,
  listEndpointsOf,
  resumePendingDeliveries,
  secretColumns,
  updateEndpoint,
} from './webhook-repository.ts';
import { openSecret, sealSecret } from './webhook-secrets.ts';
import { checkWebhookUrl } from './webhook-sender.ts';
import { newWebhookSecret } from './webhook-signature.ts';

export type WebhookEndpoint = components['schemas']['WebhookEndpoint'];
export type WebhookDelivery = components['schemas']['WebhookDelivery'];
type CreateRequest = components['schemas']['WebhookCreateRequest'];
type UpdateRequest = components['schemas']['WebhookUpdateRequest'];

/** Endpoints an account may have (Stripe's limit is 16 as well). */
export const endpointsPerAccount = 16;

/** How long the delivery log keeps an event (the contract says 30 days). */
const logDays = 30;

/** How long the previous secret keeps signing after a rotation, unless asked otherwise. */
const defaultOverlapSeconds = 24 * 60 * 60;

export function toApiWebhook(row: EndpointRow): WebhookEndpoint {
  return {
    webhook_id: row.id,
    url: row.url,
    description: row.description,
    events: row.events as WebhookEndpoint['events'],
    enabled: row.enabled,
    disabled_reason: row.disabled_reason,
    disabled_at: row.disabled_at?.toISOString() ?? null,
    failing_since: row.failing_since?.toISOString() ?? null,
    previous_secret_expires_at: row.previous_secret_expires_at?.toISOString() ?? null,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

function toApiDelivery(row: DeliveryRow & { event_type: string }, attempts: AttemptRow[]): WebhookDelivery {
  return {
    delivery_id: row.id,
    webhook_id: row.endpoint_id,
    event_id: row.event_id,
    event_type: row.event_type as WebhookDelivery['event_type'],
    state: row.state,
    next_attempt_at: row.state === 'pending' ? (row.next_attempt_at?.toISOString() ?? null) : null,
    created_at: row.created_at.toISOString(),
    attempts: attempts
      .filter((attempt) => attempt.delivery_id === row.id)
      .map((attempt) => ({
        attempted_at: attempt.attempted_at.toISOString(),
        status: attempt.status,
        duration_ms: attempt.duration_ms,
        response: attempt.response,
        error: attempt.error,
      })),
  };
}

function webhookNotFound(webhookId: string): NotFoundError {
  return new NotFoundError('webhook_not_found', `You have no webhook endpoint ${webhookId}.`);
}

function disabledRefusal(): ConflictError {
  return new ConflictError(
    'webhook_disabled',
    'The endpoint is disabled: enable it first (PATCH it with {"enabled": true}, or in the console).',
  );
}

/** Where the next page of the log starts: after the last delivery of this one. */
const cursorOf = (row: DeliveryRow) => encodePageCursor(row.created_at, row.id);

export function createWebhookService(deps: {
  db: Db;
  clock: Clock;
  keyRing: KeyRing;
  events: WebhookEvents;
  /** Loopback and private addresses allowed (SVC_WEBHOOK_ALLOW_PRIVATE). */
  allowPrivate: boolean;
}) {
  const { db, clock, keyRing, events } = deps;

  function checkedUrl(url: string, path: string): string {
    const checked = checkWebhookUrl(url, { allowPrivate: deps.allowPrivate });
    if (!checked.ok) {
      throw new InvalidError('invalid_webhook_url', checked.detail, {
        errors: [{ path, message: checked.detail }],
      });
    }
    return checked.url.href;
  }

  async function endpointOf(trx: Db, principal: Principal, webhookId: string, lock = false) {
    const endpoint = await findEndpointOf(trx, principal.accountId, webhookId, { lock });
    if (!endpoint) throw webhookNotFound(webhookId);
    return endpoint;
  }

  return {
    /** Events past the log's 30 days are deleted, with their deliveries and attempts. */
    async forgetOldEvents(): Promise<void> {
      await deleteEventsBefore(db, new Date(clock().getTime() - logDays * 24 * 60 * 60 * 1000));
    },

    async list(principal: Principal): Promise<WebhookEndpoint[]> {
      return (await listEndpointsOf(db, principal.accountId)).map(toApiWebhook);
    },

    async get(principal: Principal, webhookId: string): Promise<WebhookEndpoint> {
      return toApiWebhook(await endpointOf(db, principal, webhookId));
    },

    /** The new endpoint and its secret, which is never shown again. */
    async create(principal: Principal, request: CreateRequest) {
      const url = checkedUrl(request.url, '/body/url');
      const id = randomUUID();
      const secret = newWebhookSecret();
      const now = clock();
      const row = await db.transaction(async (trx) => {
        // The account's row is the lock two registrations at once queue on, so the limit holds.
        await trx('accounts').where({ id: principal.accountId }).forUpdate().first();
        if ((await countEndpointsOf(trx, principal.accountId)) >= endpointsPerAccount) {
          throw new ConflictError(
            'too_many_webhooks',
            `An account has at most ${endpointsPerAccount} webhook endpoints: remove one first, or list more event types on one.`,
          );
        }
        const sealed = sealSecret(keyRing, id, 'secret', secret);
        await events.endpointsChanged(trx, request.events);
        return insertEndpoint(trx, {
          id,
          account_id: principal.accountId,
          url,
          description: request.description?.trim() ?? '',
          events: request.events,
          enabled: true,
          disabled_reason: null,
          disabled_at: null,
          failing_since: null,
          ...(secretColumns(sealed, 'secret') as Pick<
            EndpointRow,
            'secret_ciphertext' | 'secret_key_id' | 'secret_algorithm'
          >),
          previous_secret_ciphertext: null,
          previous_secret_key_id: null,
          previous_secret_algorithm: null,
          previous_secret_expires_at: null,
          created_at: now,
          updated_at: now,
        });
      });
      return { webhook: toApiWebhook(row), secret };
    },

    async update(principal: Principal, webhookId: string, request: UpdateRequest): Promise<WebhookEndpoint> {
      const url = request.url === undefined ? undefined : checkedUrl(request.url, '/body/url');
      return db.transaction(async (trx) => {
        const endpoint = await endpointOf(trx, principal, webhookId, true);
        const now = clock();
        const enabling = request.enabled === true && !endpoint.enabled;
        const disabling = request.enabled === false && endpoint.enabled;
        const row = await updateEndpoint(trx, endpoint.id, {
          ...(url !== undefined ? { url } : {}),
          ...(request.events ? { events: request.events } : {}),
          ...(request.description !== undefined ? { description: request.description.trim() } : {}),
          // Enabled again: the failing streak starts over, and what is pending goes out at once.
          ...(enabling
            ? { enabled: true, disabled_reason: null, disabled_at: null, failing_since: null }
            : {}),
          ...(disabling ? { enabled: false, disabled_reason: 'owner' as const, disabled_at: now } : {}),
          updated_at: now,
        });
        await events.endpointsChanged(trx, row.enabled ? row.events : []);
        if (enabling) {
          await resumePendingDeliveries(trx, endpoint.id, now);
          await events.pendingResumed(trx);
        }
        return toApiWebhook(row);
      });
    },

    async remove(principal: Principal, webhookId: string): Promise<void> {
      await db.transaction(async (trx) => {
        if (!(await deleteEndpoint(trx, principal.accountId, webhookId))) throw webhookNotFound(webhookId);
        await events.endpointsChanged(trx);
      });
    },

    /** A new secret, shown once; the previous one signs beside it for `overlapSeconds`. */
    async rotateSecret(principal: Principal, webhookId: string, overlapSeconds = defaultOverlapSeconds) {
      const secret = newWebhookSecret();
      const row = await db.transaction(async (trx) => {
        const endpoint = await endpointOf(trx, principal, webhookId, true);
        const now = clock();
        const newSecret = secretColumns(sealSecret(keyRing, endpoint.id, 'secret', secret), 'secret');
        // Only the secret being replaced signs beside the new one: one rotated before it stops now.
        const previous =
          overlapSeconds > 0
            ? {
                ...secretColumns(
                  sealSecret(
                    keyRing,
                    endpoint.id,
                    'previous_secret',
                    openSecret(keyRing, endpoint, 'secret') as string,
                  ),
                  'previous_secret',
                ),
                previous_secret_expires_at: new Date(now.getTime() + overlapSeconds * 1000),
              }
            : {
                previous_secret_ciphertext: null,
                previous_secret_key_id: null,
                previous_secret_algorithm: null,
                previous_secret_expires_at: null,
              };
        return updateEndpoint(trx, endpoint.id, {
          ...newSecret,
          ...previous,
          updated_at: now,
        } as Partial<EndpointRow>);
      });
      return { webhook: toApiWebhook(row), secret };
    },

    async ping(principal: Principal, webhookId: string): Promise<WebhookDelivery> {
      return db.transaction(async (trx) => {
        const endpoint = await endpointOf(trx, principal, webhookId);
        if (!endpoint.enabled) throw disabledRefusal();
        const delivery = await events.recordFor(trx, endpoint, 'webhook.ping', { webhook_id: endpoint.id });
        return toApiDelivery({ ...delivery, event_type: 'webhook.ping' }, []);
      });
    },

    async deliveries(
      principal: Principal,
      webhookId: string,
      query: { cursor?: string; limit?: number },
    ): Promise<{ deliveries: WebhookDelivery[]; next_cursor: string | null }> {
      const after = query.cursor === undefined ? undefined : decodePageCursor(query.cursor, isUuid);
      const endpoint = await endpointOf(db, principal, webhookId);
      const limit = query.limit ?? 50;
      const rows = await listDeliveries(db, endpoint.id, limit, after);
      const page = rows.slice(0, limit);
      const attempts = await attemptsOf(
        db,
        page.map((row) => row.id),
      );
      const last = page.at(-1);
      return {
        deliveries: page.map((row) => toApiDelivery(row, attempts)),
        next_cursor: rows.length > limit && last ? cursorOf(last) : null,
      };
    },

    async redeliver(principal: Principal, webhookId: string, deliveryId: string): Promise<WebhookDelivery> {
      return db.transaction(async (trx) => {
        const endpoint = await endpointOf(trx, principal, webhookId);
        const delivery = await findDelivery(trx, endpoint.id, deliveryId);
        if (!delivery) {
          throw new NotFoundError(
            'delivery_not_found',
            `The endpoint has no delivery ${deliveryId} (the log keeps 30 days).`,
          );
        }
        if (!endpoint.enabled) throw disabledRefusal();
        if (delivery.state === 'pending') {
          // Still being tried: it goes out now, rather than a second delivery of the same event.
          await deliverNow(trx, delivery.id, clock());
          await events.pendingResumed(trx);
          const attempts = await attemptsOf(trx, [delivery.id]);
          return toApiDelivery({ ...delivery, next_attempt_at: clock() }, attempts);
        }
        const again = await events.redeliver(trx, endpoint.id, delivery.event_id);
        return toApiDelivery({ ...again, event_type: delivery.event_type }, []);
      });
    },
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;
