/**
 * Webhooks, verified where an integrator receives them: svc signs each attempt by the Standard
 * Webhooks scheme (standardwebhooks.com), HMAC-SHA256 of `${webhook-id}.${webhook-timestamp}.${body}`
 * under the endpoint's `whsec_…` secret. Built on Web Crypto alone (`globalThis.crypto.subtle`), so
 * the same code runs in Node, browsers (secure contexts), Deno and workers.
 */

/** Why a webhook was refused; each is a WebhookVerificationError's `code`. */
export const webhookVerificationErrorCodes = [
  /** `webhook-id`, `webhook-timestamp` or `webhook-signature` is absent or empty. */
  'missing_headers',
  /** `webhook-timestamp` is not whole seconds, or a header is sent twice where one is meant. */
  'invalid_headers',
  /** The secret given to the verifier is not `whsec_` + base64 (a fault of the receiver's setup). */
  'invalid_secret',
  /** No `v1,` signature of the header matches the body under the secret: forged, altered, or another secret. */
  'invalid_signature',
  /** Signed longer ago than the tolerance: a replay, or a receiver's clock that is wrong. */
  'timestamp_too_old',
  /** Signed further ahead than the tolerance: a clock that is wrong, here or at the sender. */
  'timestamp_in_future',
  /** `seen` says this id was handled before. */
  'replayed',
  /** The body is signed but is not a JSON object. */
  'invalid_payload',
] as const;

export type WebhookVerificationErrorCode = (typeof webhookVerificationErrorCodes)[number];

/** A webhook that was refused; `code` says why. The message never holds the secret or a signature. */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
  readonly code: WebhookVerificationErrorCode;

  constructor(code: WebhookVerificationErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** A request's headers: a fetch `Headers`, or node:http's `req.headers` (any case, arrays allowed). */
export type WebhookHeaders =
  | { get(name: string): string | null }
  | Record<string, string | readonly string[] | undefined>;

export interface VerifyWebhookOptions {
  /** The time to check `webhook-timestamp` against (a Date or ms since the epoch); now by default. */
  now?: Date | number;
  /** How far `webhook-timestamp` may be from `now`, either way, in seconds: 300 by default. */
  toleranceSeconds?: number;
  /**
   * Asked last, once the webhook is otherwise valid (so forged requests never reach your store):
   * true when this `webhook-id` was handled before. Each attempt is signed anew, so keep ids as long
   * as an event can come again: svc retries for about three days, and a redelivery from the
   * delivery log may come up to 30 days later.
   */
  seen?: (id: string) => boolean | Promise<boolean>;
}

/** A webhook whose signature, time and id passed. */
export interface VerifiedWebhook {
  /** `webhook-id`: the same on every attempt of one event, your idempotency key. */
  id: string;
  /**
   * `webhook-timestamp`: when this attempt was signed (a retry or a redelivery is signed anew).
   * Not when the event happened: that is `timestamp`.
   */
  signedAt: Date;
  /**
   * The payload's `timestamp`: when the event happened, in RFC 3339, the same on every attempt;
   * order events by it. Undefined if the payload has none.
   */
  timestamp: string | undefined;
  /** The payload's `type` (such as `command.state_changed`); `''` if the payload has none. */
  type: string;
  /** The payload's `data`. */
  data: unknown;
  /** The whole body, parsed. */
  payload: unknown;
}

const secretPrefix = 'whsec_';
const defaultToleranceSeconds = 5 * 60;

/**
 * Checks that `body` (the raw bytes received, before any JSON parsing) was signed by svc with
 * `secret` within the tolerance, and returns what it says. Throws a WebhookVerificationError.
 */
export async function verifyWebhook(
  body: string | Uint8Array,
  headers: WebhookHeaders,
  secret: string,
  options: VerifyWebhookOptions = {},
): Promise<VerifiedWebhook> {
  const tolerance = options.toleranceSeconds ?? defaultToleranceSeconds;
  if (!Number.isFinite(tolerance) || tolerance < 0) {
    throw new TypeError(`toleranceSeconds must be a number of seconds, 0 or more, not ${tolerance}`);
  }
  const key = await importSecret(secret);

  const id = header(headers, 'webhook-id');
  const timestampText = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (!id || !timestampText || !signatures) {
    const missing = [
      ['webhook-id', id],
      ['webhook-timestamp', timestampText],
      ['webhook-signature', signatures],
    ].flatMap(([name, value]) => (value ? [] : [name]));
    throw new WebhookVerificationError(
      'missing_headers',
      `the request has no ${missing.join(', ')} header: is it a webhook from svc, and does your server pass the headers on?`,
    );
  }
  if (!/^\d{1,15}$/.test(timestampText)) {
    throw new WebhookVerificationError(
      'invalid_headers',
      `webhook-timestamp is ${JSON.stringify(timestampText.slice(0, 40))}, not whole seconds since the epoch`,
    );
  }

  const bodyBytes = typeof body === 'string' ? encoder.encode(body) : body;
  const expected = new Uint8Array(
    await subtle().sign('HMAC', key, concat(encoder.encode(`${id}.${timestampText}.`), bodyBytes)),
  );
  // Every `v1,` signature is tried (during a rotation svc sends one per secret); others (`v1a`, …)
  // are skipped. A header sent twice reaches here joined by `, ` (fetch, node:http): base64 never
  // ends in a comma, so one is dropped.
  const matches = signatures
    .split(/\s+/)
    .map((entry) => entry.replace(/,$/, ''))
    .filter((entry) => entry.startsWith('v1,'))
    .map((entry) => decodeBase64(entry.slice(3)))
    .some((candidate) => candidate !== undefined && equalInConstantTime(candidate, expected));
  if (!matches) {
    throw new WebhookVerificationError(
      'invalid_signature',
      'no signature of webhook-signature matches the body under this secret: check that you pass the raw ' +
        "body as received (not JSON.parse'd and stringified again) and the secret of this endpoint",
    );
  }

  const timestamp = Number(timestampText);
  const now = Math.floor(Number(options.now ?? Date.now()) / 1000);
  if (timestamp < now - tolerance) {
    throw new WebhookVerificationError(
      'timestamp_too_old',
      `the webhook was signed ${now - timestamp} s ago, more than the ${tolerance} s allowed: a replay, or this machine's clock is wrong`,
    );
  }
  if (timestamp > now + tolerance) {
    throw new WebhookVerificationError(
      'timestamp_in_future',
      `the webhook was signed ${timestamp - now} s ahead of this machine's clock, more than the ${tolerance} s allowed: is the clock right?`,
    );
  }

  let payload: unknown;
  try {
    payload = JSON.parse(typeof body === 'string' ? body : new TextDecoder().decode(body));
  } catch (cause) {
    throw new WebhookVerificationError('invalid_payload', 'the webhook is signed but its body is not JSON', {
      cause,
    });
  }
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    throw new WebhookVerificationError(
      'invalid_payload',
      'the webhook is signed but its body is not a JSON object',
    );
  }

  if (options.seen && (await options.seen(id))) {
    throw new WebhookVerificationError(
      'replayed',
      `webhook ${id} was handled before: answer 2xx and do nothing (svc sends an event again until it gets a 2xx)`,
    );
  }

  const {
    type,
    data,
    timestamp: happened,
  } = payload as { type?: unknown; data?: unknown; timestamp?: unknown };
  return {
    id,
    signedAt: new Date(timestamp * 1000),
    timestamp: typeof happened === 'string' ? happened : undefined,
    type: typeof type === 'string' ? type : '',
    data,
    payload,
  };
}

const encoder = new TextEncoder();

/** Web Crypto's SubtleCrypto: global in Node 20 and later, and in browsers on secure (https) pages only. */
function subtle() {
  const found = globalThis.crypto?.subtle;
  if (!found) {
    throw new Error(
      'verifyWebhook needs Web Crypto (globalThis.crypto.subtle): Node 20 or later, or a browser page served over https',
    );
  }
  return found;
}

async function importSecret(secret: string) {
  // Called from JavaScript too, where a missing setting arrives as undefined.
  if (typeof secret !== 'string' || secret === '') {
    throw new WebhookVerificationError(
      'invalid_secret',
      'no secret was given: pass the `whsec_…` secret of the endpoint (is its environment variable set?)',
    );
  }
  const bytes = decodeBase64(secret.startsWith(secretPrefix) ? secret.slice(secretPrefix.length) : secret);
  if (!bytes || bytes.length === 0) {
    throw new WebhookVerificationError(
      'invalid_secret',
      "the secret is not `whsec_` followed by base64: copy it whole from the endpoint's page or API answer",
    );
  }
  return subtle().importKey('raw', bytes, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
}

/** One header, whatever its case; a repeated webhook-signature is one list, a repeated id or time is refused. */
function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof headers.get === 'function')
    return (headers.get as (name: string) => string | null)(name) ?? undefined;
  const values = Object.entries(headers as Record<string, string | readonly string[] | undefined>)
    .filter(([key]) => key.toLowerCase() === name)
    .flatMap(([, value]) => (value === undefined ? [] : typeof value === 'string' ? [value] : [...value]));
  if (values.length > 1 && name !== 'webhook-signature') {
    throw new WebhookVerificationError(
      'invalid_headers',
      `the request has ${values.length} ${name} headers; a webhook has one`,
    );
  }
  return values.length > 0 ? values.join(' ') : undefined;
}

/** Standard base64, padding optional (as the Standard Webhooks libraries read secrets); undefined if it is not. */
function decodeBase64(text: string): Uint8Array<ArrayBuffer> | undefined {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return undefined;
  try {
    return Uint8Array.from(atob(text), (char) => char.charCodeAt(0));
  } catch {
    return undefined;
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array<ArrayBuffer> {
  const joined = new Uint8Array(a.length + b.length);
  joined.set(a);
  joined.set(b, a.length);
  return joined;
}

/** Equal bytes, compared in a time that depends on their length only (the length of an HMAC is no secret). */
function equalInConstantTime(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= (a[i] as number) ^ (b[i] as number);
  return difference === 0;
}
