/**
 * Webhooks, for any signed-in account: its endpoints (URL, events, enabled or disabled and why,
 * failing since), register one (its signing secret shown once), change, disable or enable it,
 * rotate its secret and remove it (both asked first), send a test ping, and read its delivery log
 * and deliver an event again. An endpoint the service disabled is said first, with how to enable it.
 */
import type { components, Problem } from '@svc/sdk';
import { useId, useState } from 'preact/hooks';
import { api, ask, fieldErrors } from '../api.ts';
import { Confirm } from '../confirm.tsx';
import {
  ActionWords,
  Alert,
  Field,
  Notice,
  PageHeading,
  useFocusOnRefusal,
  useSubmit,
  When,
} from '../parts.tsx';
import { useRefreshing } from '../refresh.ts';
import { DeliveryLog } from '../webhook-log.tsx';
import {
  DisabledByServiceNotice,
  disabledByService,
  eventWords,
  SigningSecretOnce,
  subscribableEvents,
  type WebhookEndpoint,
  type WebhookEventType,
  webhooksSeen,
} from '../webhooks.tsx';

type WebhookCreateRequest = components['schemas']['WebhookCreateRequest'];
type WebhookUpdateRequest = components['schemas']['WebhookUpdateRequest'];

/** A secret just made, with its endpoint: shown until the user says it is saved, or leaves the page. */
interface ShownSecret {
  secret: string;
  webhook: WebhookEndpoint;
  rotated: boolean;
}

export function Webhooks() {
  const [webhooks, setWebhooks] = useState<WebhookEndpoint[]>();
  const [problem, setProblem] = useState<Problem>();
  const [news, setNews] = useState<string>();
  const [secret, setSecret] = useState<ShownSecret>();

  async function load() {
    const listed = await ask(api.GET('/api/v1/webhooks'));
    if (listed.ok) {
      setWebhooks(listed.data.webhooks);
      webhooksSeen(listed.data.webhooks);
    } else setProblem(listed.problem);
  }
  useRefreshing(load);

  const actions: EndpointActions = {
    async onChanged(message) {
      setProblem(undefined);
      setNews(message);
      await load();
    },
    onSecret(shown) {
      setProblem(undefined);
      setNews(undefined);
      setSecret(shown);
      void load();
    },
    onProblem(refused) {
      setNews(undefined);
      setProblem(refused);
    },
    onNews(message) {
      setProblem(undefined);
      setNews(message);
    },
  };

  async function register(body: WebhookCreateRequest): Promise<Problem | undefined> {
    const made = await ask(api.POST('/api/v1/webhooks', { body }));
    if (!made.ok) return made.problem;
    actions.onSecret({ secret: made.data.secret, webhook: made.data.webhook, rotated: false });
    return undefined;
  }

  return (
    <main>
      <PageHeading title="Webhooks">Webhooks</PageHeading>
      <p>
        The service sends your events to these URLs as they happen (a POST each, signed with the endpoint's
        secret as the Standard Webhooks specification says), and tries again when the receiver does not answer
        2xx. Only your own apps' and cars' events are sent.
      </p>
      {webhooks && <DisabledByServiceNotice webhooks={webhooks.filter(disabledByService)} onWebhooksPage />}
      {secret && (
        <SigningSecretOnce
          {...secret}
          onDone={() => {
            setSecret(undefined);
            setNews('The signing secret is no longer shown, here or anywhere.');
          }}
        />
      )}
      {news && <Notice>{news}</Notice>}
      {problem && <Alert>{problem.detail}</Alert>}
      {webhooks?.length === 0 && <p>No endpoints yet: register the first one below.</p>}
      {webhooks && webhooks.length > 0 && (
        <>
          <h2 id="your-endpoints">Your endpoints</h2>
          <ul class="cards" aria-labelledby="your-endpoints">
            {webhooks.map((webhook) => (
              <EndpointCard key={webhook.webhook_id} webhook={webhook} {...actions} />
            ))}
          </ul>
        </>
      )}
      <section aria-labelledby="register-title">
        <h2 id="register-title">Register an endpoint</h2>
        <EndpointForm action="Register endpoint" onSave={register} />
      </section>
    </main>
  );
}

interface EndpointActions {
  onChanged: (message: string) => Promise<void>;
  onSecret: (shown: ShownSecret) => void;
  onProblem: (problem: Problem) => void;
  onNews: (message: string) => void;
}

function EndpointCard({
  webhook,
  onChanged,
  onSecret,
  onProblem,
  onNews,
}: { webhook: WebhookEndpoint } & EndpointActions) {
  const { url } = webhook;
  const [changing, setChanging] = useState(false);
  const [asking, setAsking] = useState<'rotate' | 'remove'>();
  const [stopOldSecret, setStopOldSecret] = useState(false);
  const [logShown, setLogShown] = useState(false);
  /** Bumped to have the log read again at once (a ping was just sent). */
  const [logReload, setLogReload] = useState(0);
  const logId = useId();
  const path = { params: { path: { webhook_id: webhook.webhook_id } } };

  async function change(body: WebhookUpdateRequest, said: string): Promise<Problem | undefined> {
    const changed = await ask(api.PATCH('/api/v1/webhooks/{webhook_id}', { ...path, body }));
    if (!changed.ok) return changed.problem;
    await onChanged(said);
    return undefined;
  }
  async function changeOrSay(body: WebhookUpdateRequest, said: string) {
    const refused = await change(body, said);
    if (refused) onProblem(refused);
  }

  async function ping() {
    const sent = await ask(api.POST('/api/v1/webhooks/{webhook_id}/pings', path));
    if (!sent.ok) return onProblem(sent.problem);
    setLogShown(true);
    setLogReload((count) => count + 1);
    onNews(`Sent a test ping to ${url}: follow its delivery at the top of the log.`);
  }

  async function rotate() {
    setAsking(undefined);
    const rotated = await ask(
      api.POST('/api/v1/webhooks/{webhook_id}/secret-rotations', {
        ...path,
        body: stopOldSecret ? { previous_secret_lasts_seconds: 0 } : {},
      }),
    );
    setStopOldSecret(false);
    if (!rotated.ok) return onProblem(rotated.problem);
    onSecret({ secret: rotated.data.secret, webhook: rotated.data.webhook, rotated: true });
  }

  async function remove() {
    setAsking(undefined);
    const removed = await ask(api.DELETE('/api/v1/webhooks/{webhook_id}', path));
    if (!removed.ok) return onProblem(removed.problem);
    await onChanged(`Removed ${url}: nothing more is sent to it, and its delivery log is gone.`);
  }

  return (
    <li class={`card${disabledByService(webhook) ? ' card-alert' : ''}`}>
      <h3>{url}</h3>
      {webhook.description && <p>{webhook.description}</p>}
      <EndpointFacts webhook={webhook} />
      <div class="actions">
        {webhook.enabled && (
          <button type="button" onClick={ping}>
            <ActionWords action="Send test ping" on={`to ${url}`} />
          </button>
        )}
        <button
          type="button"
          class="secondary"
          aria-expanded={logShown}
          aria-controls={logId}
          onClick={() => setLogShown(!logShown)}
        >
          <ActionWords action={logShown ? 'Hide delivery log' : 'Show delivery log'} on={`of ${url}`} />
        </button>
        <button
          type="button"
          class="secondary"
          aria-expanded={changing}
          onClick={() => setChanging(!changing)}
        >
          <ActionWords action="Change" on={url} />
        </button>
        {webhook.enabled ? (
          <button
            type="button"
            class="secondary"
            onClick={() =>
              changeOrSay({ enabled: false }, `Disabled ${url}: nothing is sent to it until you enable it.`)
            }
          >
            <ActionWords action="Disable" on={url} />
          </button>
        ) : (
          <button
            type="button"
            onClick={() =>
              changeOrSay(
                { enabled: true },
                disabledByService(webhook)
                  ? `Enabled ${url}: the deliveries still pending go out at once, and new events too.`
                  : `Enabled ${url}: its events are sent to it again.`,
              )
            }
          >
            <ActionWords action="Enable" on={url} />
          </button>
        )}
        <button type="button" class="secondary" onClick={() => setAsking('rotate')}>
          <ActionWords action="Rotate secret" on={`of ${url}`} />
        </button>
        <button type="button" class="danger" onClick={() => setAsking('remove')}>
          <ActionWords action="Remove" on={url} />
        </button>
      </div>
      {changing && (
        <section aria-label={`Change ${url}`}>
          <EndpointForm
            action="Save changes"
            initial={webhook}
            onSave={async (body) => {
              const refused = await change(body, `Saved the changes to ${body.url}.`);
              if (!refused) setChanging(false);
              return refused;
            }}
            onCancel={() => setChanging(false)}
          />
        </section>
      )}
      <div id={logId}>
        {logShown && (
          <DeliveryLog
            webhook={webhook}
            reload={logReload}
            onProblem={onProblem}
            onRedelivered={(delivery) =>
              onNews(
                `Delivering ${delivery.event_type} ${delivery.event_id} again, as a new delivery at the top of the log.`,
              )
            }
          />
        )}
      </div>
      {asking === 'rotate' && (
        <Confirm
          title={`A new signing secret for ${url}?`}
          action="Rotate secret"
          keep="Keep the secret"
          onConfirm={rotate}
          onCancel={() => {
            setAsking(undefined);
            setStopOldSecret(false);
          }}
        >
          <p>
            A new secret is made and shown once. The old one keeps signing beside it for a day, so your
            receiver keeps accepting deliveries while you give it the new one.
          </p>
          <label class="choice">
            <input
              type="checkbox"
              checked={stopOldSecret}
              onChange={(event) => setStopOldSecret((event.currentTarget as HTMLInputElement).checked)}
            />
            <span>Stop the old secret now instead (it has leaked)</span>
          </label>
        </Confirm>
      )}
      {asking === 'remove' && (
        <Confirm
          title={`Remove ${url}?`}
          action="Remove endpoint"
          keep="Keep it"
          onConfirm={remove}
          onCancel={() => setAsking(undefined)}
        >
          <p>Nothing more is sent to it, and its delivery log is deleted. This cannot be undone.</p>
        </Confirm>
      )}
    </li>
  );
}

function EndpointFacts({ webhook }: { webhook: WebhookEndpoint }) {
  return (
    <dl>
      <dt>State</dt>
      <dd>
        <EndpointState webhook={webhook} />
      </dd>
      <dt>Events</dt>
      <dd>
        <ul class="plain">
          {webhook.events.map((type) => (
            <li key={type}>
              <code>{type}</code>
            </li>
          ))}
        </ul>
      </dd>
      {webhook.failing_since && (
        <>
          <dt>Failing since</dt>
          <dd>
            <When at={webhook.failing_since} />
            {webhook.enabled &&
              ': no delivery has succeeded since; if none does for long, the service disables it'}
          </dd>
        </>
      )}
      {webhook.previous_secret_expires_at && (
        <>
          <dt>Old secret signs until</dt>
          <dd>
            <When at={webhook.previous_secret_expires_at} />
          </dd>
        </>
      )}
      <dt>Registered</dt>
      <dd>
        <When at={webhook.created_at} />
      </dd>
    </dl>
  );
}

function EndpointState({ webhook }: { webhook: WebhookEndpoint }) {
  if (webhook.enabled) return <span class="state state-enabled">Enabled</span>;
  if (webhook.disabled_reason === 'failing')
    return (
      <>
        <span class="state state-disabled">Disabled by the service</span> on <When at={webhook.disabled_at} />
        , after every delivery failed: enable it once the receiver answers again
      </>
    );
  return (
    <>
      <span class="state state-disabled">Disabled by you</span> on <When at={webhook.disabled_at} />
    </>
  );
}

/** Register an endpoint, or change one: its URL, the events sent to it and a note on what it is for. */
function EndpointForm({
  action,
  initial,
  onSave,
  onCancel,
}: {
  action: string;
  initial?: WebhookEndpoint;
  onSave: (body: WebhookCreateRequest) => Promise<Problem | undefined>;
  onCancel?: () => void;
}) {
  const [url, setUrl] = useState(initial?.url ?? '');
  const [events, setEvents] = useState<WebhookEventType[]>(initial?.events ?? []);
  const [description, setDescription] = useState(initial?.description ?? '');
  const [refusal, setRefusal] = useState<EndpointRefusal>();
  const form = useFocusOnRefusal(refusal);
  const { busy, onSubmit } = useSubmit(async () => {
    const refused = await onSave({ url: url.trim(), events, description: description.trim() });
    if (refused) return setRefusal(endpointRefusal(refused));
    setRefusal(undefined);
    if (initial) return;
    setUrl('');
    setEvents([]);
    setDescription('');
  });
  return (
    <form ref={form} onSubmit={onSubmit} noValidate>
      <Field
        label="URL"
        name="url"
        hint="Where the events are POSTed: a whole URL such as https://hooks.example.com/svc, with no user name or password in it."
        value={url}
        onInput={setUrl}
        error={refusal?.url}
        autoComplete="off"
        required
      />
      <EventChoices chosen={events} onChange={setEvents} error={refusal?.events} />
      <Field
        label="Description (optional)"
        name="description"
        hint="What the endpoint is for, for you to recognise it."
        value={description}
        onInput={setDescription}
        error={refusal?.description}
      />
      {refusal?.other && <Alert>{refusal.other}</Alert>}
      <div class="actions">
        <button type="submit" aria-disabled={busy}>
          {initial ? <ActionWords action={action} on={`to ${initial.url}`} /> : action}
        </button>
        {onCancel && (
          <button type="button" class="secondary" onClick={onCancel}>
            Cancel
          </button>
        )}
      </div>
    </form>
  );
}

/** The event types as checkboxes, in the contract's order. */
function EventChoices({
  chosen,
  onChange,
  error,
}: {
  chosen: WebhookEventType[];
  onChange: (events: WebhookEventType[]) => void;
  error: string | undefined;
}) {
  const id = useId();
  function toggle(type: WebhookEventType, on: boolean) {
    onChange(subscribableEvents.filter((each) => (each === type ? on : chosen.includes(each))));
  }
  return (
    <fieldset class="field" aria-describedby={error ? `${id}-hint ${id}-error` : `${id}-hint`}>
      <legend>Events to send</legend>
      <p class="hint" id={`${id}-hint`}>
        A test ping is sent whenever you ask for one, whichever you choose.
      </p>
      {subscribableEvents.map((type) => (
        <label key={type} class="choice">
          <input
            type="checkbox"
            name="events"
            value={type}
            checked={chosen.includes(type)}
            aria-invalid={error ? 'true' : undefined}
            onChange={(event) => toggle(type, (event.currentTarget as HTMLInputElement).checked)}
          />
          <span>
            <code>{type}</code>: {eventWords[type]}
          </span>
        </label>
      ))}
      {error && (
        <p class="field-error" id={`${id}-error`} role="alert">
          {error}
        </p>
      )}
    </fieldset>
  );
}

interface EndpointRefusal {
  url?: string;
  events?: string;
  description?: string;
  /** A refusal of no one field (too many endpoints), said above the button. */
  other?: string;
}

/** The service's refusal at the field it is about; the URL's own problem in the service's words. */
function endpointRefusal(problem: Problem): EndpointRefusal {
  const { url, events, description } = fieldErrors(problem);
  const refusal: EndpointRefusal = {};
  if (url) refusal.url = url;
  else if (problem.code === 'invalid_webhook_url') refusal.url = sentence(problem.detail ?? problem.title);
  if (events) refusal.events = events === 'Choose at least one.' ? 'Choose at least one event.' : events;
  if (description) refusal.description = description;
  if (!refusal.url && !refusal.events && !refusal.description)
    refusal.other = problem.detail ?? problem.title;
  return refusal;
}

function sentence(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1) + (text.endsWith('.') ? '' : '.');
}
