/**
 * How svc signs a webhook: the Standard Webhooks scheme (standardwebhooks.com, spec 1.0.0), so a
 * receiver can check it with `verifyWebhook` of @svc/sdk or any Standard Webhooks library.
 *
 * The signed content is `${id}.${timestamp}.${body}`, HMAC-SHA256 under the endpoint's secret, sent
 * as `v1,<base64>`; the secret is shown to its owner as `whsec_` + base64 of its bytes. During a
 * rotation's overlap both secrets sign, and `webhook-signature` carries both, space-separated: a
 * receiver that still holds the old secret and one that already holds the new one both pass.
 */
import { createHmac, randomBytes } from 'node:crypto';

const secretPrefix = 'whsec_';

/** 32 random bytes: inside the spec's 24 to 64, as much as SHA-256 can use. */
const secretBytes = 32;

/** Sent with every attempt, so a receiver's logs and firewall can tell svc's webhooks apart. */
export const webhookUserAgent = 'svc-webhooks/1';

/** A new endpoint secret, as its owner sees it once: `whsec_` + base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return `${secretPrefix}${randomBytes(secretBytes).toString('base64')}`;
}

/** The key bytes of a `whsec_…` secret (the prefix is optional, as in every Standard Webhooks library). */
function secretKey(secret: string): Buffer {
  const encoded = secret.startsWith(secretPrefix) ? secret.slice(secretPrefix.length) : secret;
  // Node's base64 decoder skips what is not base64; a secret that is not exactly base64 is a bug
  // of the caller's, and signing with whatever bytes were left would send webhooks no one verifies.
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded) || encoded.replace(/=+$/, '').length % 4 === 1) {
    throw new TypeError('a webhook secret is `whsec_` followed by base64 (newWebhookSecret makes one)');
  }
  return Buffer.from(encoded, 'base64');
}

export interface SignedContent {
  /** The webhook's id: the same on every attempt of one event, the receiver's idempotency key. */
  id: string;
  /** The attempt's time, in whole seconds since the epoch. */
  timestamp: number;
  /** The body exactly as sent: the receiver verifies these bytes, before any JSON parsing. */
  body: string;
}

function checkSignedContent({ id, timestamp }: SignedContent): void {
  // The spec: neither may hold a `.`, or `a.b` + `c` and `a` + `b.c` would sign alike.
  if (id.length === 0 || id.includes('.') || /\s/.test(id)) {
    throw new TypeError(`a webhook id must be non-empty, without dots or spaces: ${JSON.stringify(id)}`);
  }
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw new TypeError(`a webhook timestamp is whole seconds since the epoch, not ${timestamp}`);
  }
}

/** The `v1,<base64>` signature of one attempt under one secret. */
export function signWebhook({ secret, ...content }: SignedContent & { secret: string }): string {
  checkSignedContent(content);
  const { id, timestamp, body } = content;
  const signature = createHmac('sha256', secretKey(secret))
    .update(`${id}.${timestamp}.${body}`, 'utf8')
    .digest('base64');
  return `v1,${signature}`;
}

/**
 * The headers of one attempt: `webhook-id`, `webhook-timestamp`, and `webhook-signature` with one
 * `v1,…` per secret (the current one first, then one being rotated out), plus the body's type and
 * svc's user agent.
 */
export function webhookHeaders({
  secrets,
  ...content
}: SignedContent & { secrets: readonly string[] }): Record<string, string> {
  if (secrets.length === 0) throw new TypeError('a webhook needs at least one secret to sign it');
  return {
    'content-type': 'application/json',
    'user-agent': webhookUserAgent,
    'webhook-id': content.id,
    'webhook-timestamp': String(content.timestamp),
    'webhook-signature': secrets.map((secret) => signWebhook({ secret, ...content })).join(' '),
  };
}
