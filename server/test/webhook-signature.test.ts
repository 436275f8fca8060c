/**
 * Webhook signatures by the Standard Webhooks scheme: the reference libraries' own test vector
 * (the same in the JavaScript, Python, Go, PHP, Java and C# libraries of
 * standard-webhooks/standard-webhooks) comes out exactly, and what svc signs passes the SDK's
 * verifyWebhook, as an integrator's receiver runs it.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { verifyWebhook, WebhookVerificationError } from '@svc/sdk';
import { describe, test } from 'vitest';
import { newWebhookSecret, signWebhook, webhookHeaders } from '../src/webhooks/webhook-signature.ts';

/** The reference libraries' vector ("sign function works"). */
const vector = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};

describe('signWebhook', () => {
  test("when the reference libraries' vector is signed then the signature is theirs, byte for byte", () => {
    const { secret, id, timestamp, body } = vector;
    assert.equal(signWebhook({ secret, id, timestamp, body }), vector.signature);
  });

  test('when the secret comes without its whsec_ prefix then the signature is the same', () => {
    const { id, timestamp, body } = vector;
    const bare = vector.secret.slice('whsec_'.length);
    assert.equal(signWebhook({ secret: bare, id, timestamp, body }), vector.signature);
  });

  test('when the body, the id or the time differs by one character then so does the signature', () => {
    const { secret, id, timestamp, body } = vector;
    const signatures = [
      signWebhook({ secret, id, timestamp, body: body.replace('2432232314', '2432232315') }),
      signWebhook({ secret, id: `${id}x`, timestamp, body }),
      signWebhook({ secret, id, timestamp: timestamp + 1, body }),
    ];
    for (const signature of signatures) assert.notEqual(signature, vector.signature);
  });

  test('when the body holds characters beyond ASCII then it is signed as UTF-8, as receivers read it', () => {
    const secret = newWebhookSecret();
    const body = '{"type":"car.renamed","data":{"name":"Åsa’s Škoda 🚗"}}';
    const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
    const expected = createHmac('sha256', key).update(Buffer.from(`msg_1.1700000000.${body}`, 'utf8'));
    assert.equal(
      signWebhook({ secret, id: 'msg_1', timestamp: 1700000000, body }),
      `v1,${expected.digest('base64')}`,
    );
  });

  test('when a secret is not base64, or an id holds a dot, or the time is not whole seconds then it throws', () => {
    const { id, timestamp, body } = vector;
    assert.throws(() => signWebhook({ secret: 'whsec_', id, timestamp, body }), TypeError);
    assert.throws(() => signWebhook({ secret: 'whsec_not base64!', id, timestamp, body }), TypeError);
    // A dot would let `a.b` + `c` and `a` + `b.c` sign alike (the spec's warning).
    assert.throws(() => signWebhook({ secret: vector.secret, id: 'msg.1', timestamp, body }), /dots/);
    assert.throws(
      () => signWebhook({ secret: vector.secret, id, timestamp: 1614265330.5, body }),
      /whole seconds/,
    );
    assert.throws(() => signWebhook({ secret: vector.secret, id, timestamp: -1, body }), /whole seconds/);
  });
});

describe('newWebhookSecret', () => {
  test('when a secret is made then it is whsec_ and the base64 of 32 bytes, new each time', () => {
    const secrets = new Set(Array.from({ length: 20 }, () => newWebhookSecret()));
    assert.equal(secrets.size, 20);
    for (const secret of secrets) {
      assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
      assert.equal(Buffer.from(secret.slice(6), 'base64').length, 32);
    }
  });
});

describe('webhookHeaders', () => {
  test('when one secret signs then the headers are the three webhook- ones, the JSON type and svc’s agent', () => {
    const { secret, id, timestamp, body } = vector;
    assert.deepEqual(webhookHeaders({ secrets: [secret], id, timestamp, body }), {
      'content-type': 'application/json',
      'user-agent': 'svc-webhooks/1',
      'webhook-id': id,
      'webhook-timestamp': '1614265330',
      'webhook-signature': vector.signature,
    });
  });

  test('when two secrets sign (a rotation) then webhook-signature holds both, space-separated, the first first', () => {
    const { secret, id, timestamp, body } = vector;
    const next = newWebhookSecret();
    const headers = webhookHeaders({ secrets: [next, secret], id, timestamp, body });
    assert.equal(
      headers['webhook-signature'],
      `${signWebhook({ secret: next, id, timestamp, body })} ${vector.signature}`,
    );
  });

  test('when no secret is given then it throws rather than send an unsigned webhook', () => {
    const { id, timestamp, body } = vector;
    assert.throws(() => webhookHeaders({ secrets: [], id, timestamp, body }), /at least one secret/);
  });
});

describe('what svc signs, as a receiver verifies it with @svc/sdk', () => {
  const body = JSON.stringify({
    type: 'car.online',
    timestamp: '2026-11-21T10:06:00.000Z',
    data: { device_id: 'brand_a:1HGCM82633A004352', online: true },
  });
  const now = new Date('2026-11-21T10:06:01Z');
  const timestamp = Math.floor(now.getTime() / 1000);

  test('when the receiver holds the secret then verifyWebhook returns the event', async () => {
    const secret = newWebhookSecret();
    const headers = webhookHeaders({
      secrets: [secret],
      id: 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W',
      timestamp,
      body,
    });
    const event = await verifyWebhook(body, headers, secret, { now });
    assert.deepEqual(event, {
      id: 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W',
      signedAt: new Date(timestamp * 1000),
      timestamp: '2026-11-21T10:06:00.000Z',
      type: 'car.online',
      data: { device_id: 'brand_a:1HGCM82633A004352', online: true },
      payload: JSON.parse(body),
    });
  });

  test('when a rotation signs with two secrets then a receiver holding either one verifies it', async () => {
    const [current, next] = [newWebhookSecret(), newWebhookSecret()];
    const headers = webhookHeaders({ secrets: [next, current], id: 'msg_1', timestamp, body });
    for (const secret of [current, next]) {
      assert.equal((await verifyWebhook(body, headers, secret, { now })).id, 'msg_1');
    }
    const stranger = await verifyWebhook(body, headers, newWebhookSecret(), { now }).catch((error) => error);
    assert.ok(stranger instanceof WebhookVerificationError);
    assert.equal(stranger.code, 'invalid_signature');
  });
});
