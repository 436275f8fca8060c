/**
 * Webhook endpoints as the console shows them wherever they come up: event types in words, what
 * an endpoint's state means, the signing secret shown once, and the notice, on every page, of an
 * endpoint the service disabled because every delivery to it failed.
 */
import type { components } from '@svc/sdk';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { api, ask } from './api.ts';
import { CopyButton } from './cars.tsx';
import { Link, When } from './parts.tsx';
import { type PagePath, pages } from './router.ts';

export type WebhookEndpoint = components['schemas']['WebhookEndpoint'];
export type WebhookEventType = components['schemas']['WebhookEventType'];

/** What each event says happened, in the contract's words; the ping is sent only when asked for. */
export const eventWords: Record<WebhookEventType, string> = {
  'mini_app.review_state_changed': 'a version of one of your apps moved in review',
  'mini_app.rollout_moved':
    'a rollout of one of your apps started, was raised, paused, resumed or rolled back',
  'mini_app.rollout_completed': 'a rollout of one of your apps completed: its version is live on every car',
  'command.state_changed': 'a command for one of your cars moved',
  'car.online': 'one of your cars connected',
  'car.offline': 'one of your cars went away',
  'webhook.ping': 'the test ping you sent',
};

/** The types an endpoint may ask for: every one but the ping, which is always delivered. */
export const subscribableEvents = (Object.keys(eventWords) as WebhookEventType[]).filter(
  (type) => type !== 'webhook.ping',
);

/** Whether the service stopped sending to the endpoint because every delivery to it failed. */
export function disabledByService(webhook: WebhookEndpoint): boolean {
  return !webhook.enabled && webhook.disabled_reason === 'failing';
}

/** What the Webhooks page tells the notice: the endpoints as it just read them. */
const webhooksSeenEvent = 'svc:webhooks-seen';

/**
 * The Webhooks page read the account's endpoints (after any change it made): the notice follows
 * at once, so that leaving the page after enabling an endpoint never shows the notice of before.
 */
export function webhooksSeen(webhooks: WebhookEndpoint[]): void {
  window.dispatchEvent(new CustomEvent(webhooksSeenEvent, { detail: webhooks }));
}

/**
 * The account's endpoints the service disabled, asked for again on every page the user opens, so
 * that the notice is seen on signing in and goes once the endpoint is enabled.
 */
export function useWebhooksDisabledByService(
  signedIn: boolean,
  page: PagePath | undefined,
): WebhookEndpoint[] {
  const [disabled, setDisabled] = useState<WebhookEndpoint[]>([]);
  useEffect(() => {
    if (!signedIn) return setDisabled([]);
    let current = true;
    void ask(api.GET('/api/v1/webhooks')).then((listed) => {
      if (current && listed.ok) setDisabled(listed.data.webhooks.filter(disabledByService));
    });
    return () => {
      current = false;
    };
  }, [signedIn, page]);
  useEffect(() => {
    const seen = (event: Event) =>
      setDisabled((event as CustomEvent<WebhookEndpoint[]>).detail.filter(disabledByService));
    window.addEventListener(webhooksSeenEvent, seen);
    return () => window.removeEventListener(webhooksSeenEvent, seen);
  }, []);
  return disabled;
}

/**
 * What happened to an endpoint the service disabled, and how to turn it back on: shown on every
 * page (not taking the focus from the page's heading) and, more fully, on the Webhooks page.
 */
export function DisabledByServiceNotice({
  webhooks,
  onWebhooksPage,
}: {
  webhooks: WebhookEndpoint[];
  onWebhooksPage?: boolean;
}) {
  const titleId = useId();
  if (webhooks.length === 0) return null;
  return (
    <section class="alert disabled-webhooks" aria-labelledby={titleId}>
      <p id={titleId}>
        <strong>
          {webhooks.length === 1
            ? 'A webhook endpoint of yours is disabled: nothing is sent to it.'
            : `${webhooks.length} webhook endpoints of yours are disabled: nothing is sent to them.`}
        </strong>
      </p>
      <ul>
        {webhooks.map((webhook) => (
          <li key={webhook.webhook_id}>
            The service disabled <code>{webhook.url}</code> on <When at={webhook.disabled_at} />: every
            delivery to it had failed since <When at={webhook.failing_since} />.
          </li>
        ))}
      </ul>
      <p>
        Look at the delivery log for what the receiver answered, fix it, then choose <strong>Enable</strong>
        {onWebhooksPage ? (
          ' on the endpoint below'
        ) : (
          <>
            {' '}
            on the <Link to={pages.webhooks}>Webhooks page</Link>
          </>
        )}
        : the deliveries still pending go out at once.
      </p>
    </section>
  );
}

/**
 * A signing secret, shown this once: the service keeps it encrypted and never shows it again.
 * Leaving the page forgets it too.
 */
export function SigningSecretOnce({
  secret,
  webhook,
  rotated,
  onDone,
}: {
  secret: string;
  webhook: WebhookEndpoint;
  rotated: boolean;
  onDone: () => void;
}) {
  const heading = useRef<HTMLHeadingElement>(null);
  const titleId = useId();
  useEffect(() => heading.current?.focus(), []);
  return (
    <section class="secret" aria-labelledby={titleId}>
      <h2 id={titleId} ref={heading} tabIndex={-1}>
        {rotated ? 'The new signing secret' : 'The signing secret'} of {webhook.url}
      </h2>
      <p class="warning">
        <strong>Shown only this once.</strong> Copy it now to where your receiver reads it (it checks each
        delivery's signature with it, e.g. with <code>verifyWebhook</code> from <code>@svc/sdk</code>): the
        service keeps it encrypted and cannot show it again. If it is lost, rotate the secret.
      </p>
      {rotated &&
        (webhook.previous_secret_expires_at ? (
          <p>
            The old secret keeps signing beside it until <When at={webhook.previous_secret_expires_at} />:
            each delivery carries both signatures until then, so the receiver keeps working while you give it
            the new one.
          </p>
        ) : (
          <p>The old secret no longer signs: deliveries carry only the new one's signature.</p>
        ))}
      <dl>
        <dt>Signing secret</dt>
        <dd>
          <code class="password">{secret}</code>{' '}
          <CopyButton text={secret} action="Copy signing secret" on="shown once" />
        </dd>
      </dl>
      <button type="button" onClick={onDone}>
        I have saved the secret
      </button>
    </section>
  );
}
