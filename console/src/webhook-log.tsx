/**
 * An endpoint's delivery log: each event sent to it (its type and id, never its payload), where
 * its delivery stands, and every attempt with what the receiver answered. Asked for again while
 * shown, so a ping or a retry appears as it happens.
 */
import type { components, Problem } from '@svc/sdk';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { api, ask } from './api.ts';
import { ActionWords, When } from './parts.tsx';
import { useRefreshing } from './refresh.ts';
import type { WebhookEndpoint } from './webhooks.tsx';

type WebhookDelivery = components['schemas']['WebhookDelivery'];
type WebhookAttempt = components['schemas']['WebhookAttempt'];

const pageSize = 20;

const stateWords: Record<WebhookDelivery['state'], string> = {
  pending: 'Pending',
  delivered: 'Delivered',
  failed: 'Failed: its retries are spent',
};

/** Why an attempt failed, when no status says it. */
const errorWords: Record<string, string> = {
  timeout: 'no answer in time',
  address_refused: 'its address is not allowed',
  redirect: 'a redirect (not followed)',
  connection_failed: 'could not connect',
  answer_too_large: 'an answer too large',
};

export function DeliveryLog({
  webhook,
  reload,
  onRedelivered,
  onProblem,
}: {
  webhook: WebhookEndpoint;
  /** Changed by the card to have the log read again now (a ping was just sent). */
  reload: number;
  onRedelivered: (delivery: WebhookDelivery) => void;
  onProblem: (problem: Problem) => void;
}) {
  const titleId = useId();
  const [newest, setNewest] = useState<WebhookDelivery[]>();
  const [older, setOlder] = useState<WebhookDelivery[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const path = { webhook_id: webhook.webhook_id };
  /**
   * Whether the log is still shown: a read in flight when its endpoint was removed answers 404,
   * which must not replace the news of the removal.
   */
  const shown = useRef(true);
  useEffect(
    () => () => {
      shown.current = false;
    },
    [],
  );

  /** The newest page: what changes while the page is open. Older pages, once asked for, are kept. */
  async function load() {
    const listed = await ask(
      api.GET('/api/v1/webhooks/{webhook_id}/deliveries', { params: { path, query: { limit: pageSize } } }),
    );
    if (!shown.current) return;
    if (!listed.ok) return onProblem(listed.problem);
    setNewest(listed.data.deliveries);
    setCursor((before) => (older.length > 0 ? before : listed.data.next_cursor));
  }
  useRefreshing(load);
  useEffect(() => {
    if (reload > 0) void load();
  }, [reload]);

  async function showOlder() {
    if (!cursor) return;
    const listed = await ask(
      api.GET('/api/v1/webhooks/{webhook_id}/deliveries', {
        params: { path, query: { limit: pageSize, cursor } },
      }),
    );
    if (!listed.ok) return onProblem(listed.problem);
    setOlder((shown) => [...shown, ...listed.data.deliveries]);
    setCursor(listed.data.next_cursor);
  }

  async function redeliver(delivery: WebhookDelivery) {
    const sent = await ask(
      api.POST('/api/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliveries', {
        params: { path: { ...path, delivery_id: delivery.delivery_id } },
      }),
    );
    if (!sent.ok) return onProblem(sent.problem);
    await load();
    onRedelivered(sent.data);
  }

  // A delivery that moved from the newest page to an older one (new ones came) is shown once.
  const seen = new Set(newest?.map((delivery) => delivery.delivery_id));
  const deliveries = [...(newest ?? []), ...older.filter((delivery) => !seen.has(delivery.delivery_id))];
  return (
    <section class="delivery-log" aria-labelledby={titleId}>
      <h4 id={titleId}>Delivery log of {webhook.url}</h4>
      <p class="hint">
        Newest first, kept 30 days. A failed attempt is tried again after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h,
        10 h, 24 h and 24 h.
      </p>
      {newest?.length === 0 && <p>Nothing sent yet: send a test ping to see one here.</p>}
      {deliveries.length > 0 && (
        <ol class="deliveries" aria-labelledby={titleId}>
          {deliveries.map((delivery) => (
            <Delivery
              key={delivery.delivery_id}
              delivery={delivery}
              endpointEnabled={webhook.enabled}
              onRedeliver={redeliver}
            />
          ))}
        </ol>
      )}
      {cursor && (
        <button type="button" class="secondary" onClick={showOlder}>
          <ActionWords action="Show older deliveries" on={`to ${webhook.url}`} />
        </button>
      )}
    </section>
  );
}

function Delivery({
  delivery,
  endpointEnabled,
  onRedeliver,
}: {
  delivery: WebhookDelivery;
  /** A disabled endpoint is sent nothing: no attempt falls due, and no redelivery is offered. */
  endpointEnabled: boolean;
  onRedeliver: (delivery: WebhookDelivery) => void;
}) {
  const what = `${delivery.event_type} ${delivery.event_id}`;
  return (
    <li class="delivery">
      <p class="delivery-title">
        <code>{delivery.event_type}</code>:{' '}
        <span class={`state delivery-${delivery.state}`}>{stateWords[delivery.state]}</span>
      </p>
      <dl>
        <dt>Event id</dt>
        <dd>
          <code>{delivery.event_id}</code>
        </dd>
        <dt>Queued</dt>
        <dd>
          <When at={delivery.created_at} seconds />
        </dd>
        {delivery.state === 'pending' && (
          <>
            <dt>Next attempt</dt>
            <dd>
              {!endpointEnabled ? (
                'once the endpoint is enabled'
              ) : delivery.next_attempt_at ? (
                <When at={delivery.next_attempt_at} seconds />
              ) : (
                'now'
              )}
            </dd>
          </>
        )}
      </dl>
      {delivery.attempts.length === 0 ? (
        <p>No attempt yet.</p>
      ) : (
        <ol class="attempts" aria-label={`Attempts to deliver ${what}, newest first`}>
          {delivery.attempts.map((attempt, index) => (
            // Attempts are only ever added, newest first: counted from the oldest, a key stays put.
            <Attempt key={delivery.attempts.length - index} attempt={attempt} />
          ))}
        </ol>
      )}
      {endpointEnabled && (
        <button type="button" class="secondary" onClick={() => onRedeliver(delivery)}>
          <ActionWords action="Deliver again" on={what} />
        </button>
      )}
    </li>
  );
}

function Attempt({ attempt }: { attempt: WebhookAttempt }) {
  return (
    <li>
      <When at={attempt.attempted_at} seconds />:{' '}
      <span class={attempt.error === null ? 'attempt-delivered' : 'attempt-failed'}>{outcome(attempt)}</span>{' '}
      in {attempt.duration_ms} ms
      {attempt.response !== '' && (
        <>
          , answering:
          <pre class="answer">
            <code>{attempt.response}</code>
          </pre>
        </>
      )}
    </li>
  );
}

/** The receiver's status, and why the attempt failed when the status alone does not say it. */
function outcome(attempt: WebhookAttempt): string {
  const why =
    attempt.error && attempt.error !== 'status' ? (errorWords[attempt.error] ?? attempt.error) : undefined;
  if (attempt.status === null) return `no HTTP answer: ${why ?? 'failed'}`;
  return why ? `HTTP ${attempt.status}, ${why}` : `HTTP ${attempt.status}`;
}
