/**
 * verifyWebhook, as an integrator's receiver calls it: the Standard Webhooks reference libraries'
 * vector passes at its own time, and each way a request can be wrong is refused with its code.
 * Signatures here are made with node:crypto, apart from the code under test.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, test } from 'vitest';
import {
  type VerifyWebhookOptions,
  verifyWebhook,
  type WebhookHeaders,
  WebhookVerificationError,
  type WebhookVerificationErrorCode,
  webhookVerificationErrorCodes,
} from '../src/index.ts';

/** The reference libraries' vector (standard-webhooks/standard-webhooks, "sign function works"). */
const vector = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};
const vectorHeaders = {
  'webhook-id': vector.id,
  'webhook-timestamp': String(vector.timestamp),
  'webhook-signature': vector.signature,
};
/** The vector's own time, as a receiver's clock would read it when the webhook arrived. */
const atVectorTime = { now: new Date(vector.timestamp * 1000) };

const secret = 'whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD';
const body = JSON.stringify({
  type: 'car.offline',
  timestamp: '2026-11-21T10:06:00.000Z',
  data: { device_id: 'brand_a:1HGCM82633A004352', online: false },
});
const timestamp = 1795255560;
const now = new Date(timestamp * 1000);

/** `v1,` + HMAC-SHA256 of id.timestamp.body under the secret's bytes, made by node:crypto. */
function sign(key: string, id: string, at: number, payload: string | Uint8Array): string {
  const bytes = Buffer.from(key.replace(/^whsec_/, ''), 'base64');
  const mac = createHmac('sha256', bytes).update(`${id}.${at}.`).update(payload).digest('base64');
  return `v1,${mac}`;
}

function signedHeaders(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    'webhook-id': 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W',
    'webhook-timestamp': String(timestamp),
    'webhook-signature': sign(secret, 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W', timestamp, body),
    ...overrides,
  };
}

/** The refusal verifyWebhook throws, checked to be a WebhookVerificationError that names no secret. */
async function refusal(
  payload: string | Uint8Array,
  headers: WebhookHeaders,
  key: string,
  options: VerifyWebhookOptions = { now },
): Promise<WebhookVerificationError> {
  try {
    await verifyWebhook(payload, headers, key, options);
  } catch (error) {
    assert.ok(error instanceof WebhookVerificationError, `not a WebhookVerificationError: ${String(error)}`);
    assert.ok(webhookVerificationErrorCodes.includes(error.code));
    const bare = typeof key === 'string' ? key.replace(/^whsec_/, '') : '';
    assert.ok(bare.length < 8 || !error.message.includes(bare), 'the message holds the secret');
    return error;
  }
  assert.fail('the webhook was accepted');
}

async function assertRefused(
  code: WebhookVerificationErrorCode,
  ...args: Parameters<typeof refusal>
): Promise<WebhookVerificationError> {
  const error = await refusal(...args);
  assert.equal(error.code, code, error.message);
  return error;
}

describe("verifyWebhook: the reference libraries' vector", () => {
  test('when it is verified at its own time then it passes and returns its payload', async () => {
    const event = await verifyWebhook(vector.body, vectorHeaders, vector.secret, atVectorTime);
    assert.deepEqual(event, {
      id: vector.id,
      signedAt: new Date(vector.timestamp * 1000),
      timestamp: undefined, // nor a time of its own
      type: '', // the vector's payload has no type
      data: undefined,
      payload: { test: 2432232314 },
    });
  });

  test('when the secret comes without whsec_ then it passes too', async () => {
    const bare = vector.secret.slice('whsec_'.length);
    assert.equal((await verifyWebhook(vector.body, vectorHeaders, bare, atVectorTime)).id, vector.id);
  });

  test('when the secret is base64 without its padding then it passes too', async () => {
    // As the Python reference library reads secrets: `…LaS` is the same key as `…LaS=`.
    const padded = 'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS=';
    const headers = {
      ...vectorHeaders,
      'webhook-signature': sign(padded, vector.id, vector.timestamp, vector.body),
    };
    const event = await verifyWebhook(vector.body, headers, `whsec_${padded.slice(0, -1)}`, atVectorTime);
    assert.equal(event.id, vector.id);
  });

  test('when it is verified now, years later, then it is refused as too old', async () => {
    await assertRefused('timestamp_too_old', vector.body, vectorHeaders, vector.secret, {});
  });

  test("when the header lists other signatures around the right one then it passes (the libraries' multi-signature case)", async () => {
    const signatures = [
      'v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=',
      'v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=',
      vector.signature,
      'v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=',
    ].join(' ');
    const event = await verifyWebhook(
      vector.body,
      { ...vectorHeaders, 'webhook-signature': signatures },
      vector.secret,
      atVectorTime,
    );
    assert.equal(event.id, vector.id);
  });
});

describe('verifyWebhook: a webhook svc signed', () => {
  test('when body, headers and secret are right then it returns the id, the time, the type and the data', async () => {
    const event = await verifyWebhook(body, signedHeaders(), secret, { now });
    assert.equal(event.id, 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W');
    assert.deepEqual(event.signedAt, now);
    assert.equal(
      event.timestamp,
      '2026-11-21T10:06:00.000Z',
      'when the event happened, not when it was signed',
    );
    assert.equal(event.type, 'car.offline');
    assert.deepEqual(event.data, { device_id: 'brand_a:1HGCM82633A004352', online: false });
    assert.deepEqual(event.payload, JSON.parse(body));
  });

  test('when the body comes as bytes (a raw-body parser) then it verifies alike, characters beyond ASCII included', async () => {
    const text = '{"type":"car.renamed","data":{"name":"Åsa’s Škoda 🚗"}}';
    const headers = signedHeaders({
      'webhook-signature': sign(secret, 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W', timestamp, text),
    });
    const event = await verifyWebhook(new TextEncoder().encode(text), headers, secret, { now });
    assert.deepEqual(event.data, { name: 'Åsa’s Škoda 🚗' });
  });

  test('when the headers are a fetch Headers, or node:http’s in any case, then they are read alike', async () => {
    const headers = signedHeaders();
    const shapes: WebhookHeaders[] = [
      new Headers(headers),
      Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toUpperCase(), value])),
      { ...headers, 'webhook-signature': [headers['webhook-signature'] as string] },
      { ...headers, 'x-forwarded-for': undefined },
    ];
    for (const shape of shapes)
      assert.equal((await verifyWebhook(body, shape, secret, { now })).type, 'car.offline');
  });

  test('when a rotation sends two signatures, the old secret’s and the new one’s, then either secret verifies', async () => {
    const next = 'whsec_dGhlIG5leHQgc2VjcmV0IG9mIHRoaXMgZW5kcG9pbnQ=';
    const both = `${sign(next, 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W', timestamp, body)} ${signedHeaders()['webhook-signature']}`;
    for (const key of [secret, next]) {
      const event = await verifyWebhook(body, signedHeaders({ 'webhook-signature': both }), key, { now });
      assert.equal(event.type, 'car.offline');
    }
    // The same two sent as two headers, which fetch and node:http join with `, `.
    const joined = new Headers(signedHeaders({ 'webhook-signature': '' }));
    joined.delete('webhook-signature');
    for (const signature of both.split(' ')) joined.append('webhook-signature', signature);
    assert.equal((await verifyWebhook(body, joined, next, { now })).type, 'car.offline');
  });

  test('when the timestamp is exactly at the tolerance, either way, then it passes', async () => {
    for (const offset of [-300, 300]) {
      await verifyWebhook(body, signedHeaders(), secret, { now: now.getTime() + offset * 1000 });
    }
  });
});

describe('verifyWebhook: refusals', () => {
  test('when one character of the body differs then it is invalid_signature', async () => {
    const tampered = body.replace('"online":false', '"online":true ');
    const error = await assertRefused('invalid_signature', tampered, signedHeaders(), secret);
    assert.match(error.message, /raw body/);
  });

  test('when the body was parsed and stringified again (spaces) then it is invalid_signature', async () => {
    await assertRefused(
      'invalid_signature',
      JSON.stringify(JSON.parse(body), null, 2),
      signedHeaders(),
      secret,
    );
  });

  test('when the secret is another endpoint’s then it is invalid_signature', async () => {
    await assertRefused('invalid_signature', body, signedHeaders(), 'whsec_b3RoZXIgZW5kcG9pbnQncyBzZWNyZXQ=');
  });

  test('when the id or the timestamp was changed then the signature no longer matches', async () => {
    await assertRefused('invalid_signature', body, signedHeaders({ 'webhook-id': 'msg_other' }), secret);
    await assertRefused(
      'invalid_signature',
      body,
      signedHeaders({ 'webhook-timestamp': String(timestamp + 1) }),
      secret,
    );
  });

  test('when the signature is cut, empty, not base64 or of another version then it is invalid_signature', async () => {
    const right = signedHeaders()['webhook-signature'] as string;
    for (const signature of [
      right.slice(0, 8),
      'v1,',
      'v1,dawfeoifkpqwoekfpqoekf',
      `v1a,${right.slice(3)}`,
      `v2,${right.slice(3)}`,
      right.slice(3),
      '!!!',
    ]) {
      await assertRefused(
        'invalid_signature',
        body,
        signedHeaders({ 'webhook-signature': signature }),
        secret,
      );
    }
  });

  test('when the webhook was signed more than 5 minutes ago then it is timestamp_too_old, even signed right', async () => {
    const error = await assertRefused('timestamp_too_old', body, signedHeaders(), secret, {
      now: now.getTime() + 301_000,
    });
    assert.match(error.message, /301 s ago/);
  });

  test('when the webhook was signed more than 5 minutes ahead then it is timestamp_in_future', async () => {
    await assertRefused('timestamp_in_future', body, signedHeaders(), secret, {
      now: now.getTime() - 301_000,
    });
  });

  test('when the tolerance is set then it is the one applied', async () => {
    await assertRefused('timestamp_too_old', body, signedHeaders(), secret, {
      now: now.getTime() + 31_000,
      toleranceSeconds: 30,
    });
    await verifyWebhook(body, signedHeaders(), secret, { now: now.getTime() + 29_000, toleranceSeconds: 30 });
  });

  test('when a header is missing or empty then it is missing_headers, naming it', async () => {
    for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature']) {
      const without = signedHeaders();
      delete without[name];
      const error = await assertRefused('missing_headers', body, without, secret);
      assert.match(error.message, new RegExp(name));
      await assertRefused('missing_headers', body, signedHeaders({ [name]: '' }), secret);
    }
  });

  test('when the timestamp is not whole seconds, or an id is sent twice, then it is invalid_headers', async () => {
    for (const value of ['hello', '1795255560.5', '-1795255560', '1795255560000000000']) {
      await assertRefused('invalid_headers', body, signedHeaders({ 'webhook-timestamp': value }), secret);
    }
    await assertRefused(
      'invalid_headers',
      body,
      { ...signedHeaders(), 'webhook-id': ['msg_1', 'msg_2'] },
      secret,
    );
  });

  test('when the secret is missing, empty or not base64 then it is invalid_secret, before anything else', async () => {
    for (const key of [undefined, '', 'whsec_', 'whsec_not-base64_url!', 'whsec_a']) {
      // An unset environment variable arrives as undefined in JavaScript.
      await assertRefused('invalid_secret', body, {}, key as unknown as string);
    }
  });

  test('when the signed body is not a JSON object then it is invalid_payload', async () => {
    for (const text of ['not json', '[1,2]', '"text"', '']) {
      const headers = signedHeaders({
        'webhook-signature': sign(secret, 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W', timestamp, text),
      });
      await assertRefused('invalid_payload', text, headers, secret);
    }
  });
});

describe('verifyWebhook: replays, with seen', () => {
  test('when seen says the id was handled then it is replayed; when not, the webhook passes', async () => {
    const handled = new Set<string>();
    const seen = (id: string) => {
      const before = handled.has(id);
      handled.add(id);
      return before;
    };
    assert.equal((await verifyWebhook(body, signedHeaders(), secret, { now, seen })).type, 'car.offline');
    const error = await assertRefused('replayed', body, signedHeaders(), secret, { now, seen });
    assert.match(error.message, /msg_2KWPBgLlAfxdpx2AI54pPJ85f4W/);
  });

  test('when seen answers by a promise (a shared store) then it is awaited', async () => {
    await assertRefused('replayed', body, signedHeaders(), secret, { now, seen: async () => true });
  });

  test('when the signature, the time or the payload is wrong then seen is never asked, so forged requests fill no store', async () => {
    const asked: string[] = [];
    const seen = (id: string) => {
      asked.push(id);
      return false;
    };
    await assertRefused('invalid_signature', body, signedHeaders({ 'webhook-id': 'msg_forged' }), secret, {
      now,
      seen,
    });
    await assertRefused('timestamp_too_old', body, signedHeaders(), secret, {
      now: now.getTime() + 600_000,
      seen,
    });
    const notJson = signedHeaders({
      'webhook-signature': sign(secret, 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W', timestamp, 'x'),
    });
    await assertRefused('invalid_payload', 'x', notJson, secret, { now, seen });
    assert.deepEqual(asked, []);
    await verifyWebhook(body, signedHeaders(), secret, { now, seen });
    assert.deepEqual(asked, ['msg_2KWPBgLlAfxdpx2AI54pPJ85f4W']);
  });
});
