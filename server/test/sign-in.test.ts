import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fingerprint, parsePrivateKey, parsePublicKeyLine, signSshsig } from '@svc/ssh';
import { afterAll, beforeAll, beforeEach, describe, test } from 'vitest';
import { type Developer, registerKey, signUpDeveloper } from './support/accounts.ts';
import { call } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';
import { type KeyFiles, SshKit } from './support/ssh.ts';

describe('SSH-key sign-in', () => {
  const kit = new SshKit();
  let service: TestService;
  let developer: Developer;
  let key: KeyFiles;
  let url: string;

  const challenge = (publicLine: string, from?: string) =>
    call(url, 'POST', '/api/v1/auth/challenges', { body: { public_key: publicLine }, from });
  const exchange = (challengeId: string, signature: string, from?: string) =>
    call(url, 'POST', '/api/v1/auth/tokens', { body: { challenge_id: challengeId, signature }, from });

  /** A challenge for `keyFiles`, signed by `signer` (ssh-keygen) over `message`. */
  async function signedChallenge(
    keyFiles: KeyFiles,
    options: { signer?: KeyFiles; namespace?: string } = {},
  ) {
    const issued = await challenge(keyFiles.publicLine);
    assert.equal(issued.status, 201, JSON.stringify(issued.body));
    const signature = kit.sign(options.signer ?? keyFiles, issued.body.message, options.namespace);
    return { id: issued.body.challenge_id as string, message: issued.body.message as string, signature };
  }

  beforeAll(async () => {
    service = await startTestService();
    url = service.url;
    developer = await signUpDeveloper(url);
    key = kit.makeKey();
    await registerKey(url, developer, key.publicLine);
  });

  afterAll(async () => {
    await service.stop();
    kit.cleanup();
  });

  // Each test starts past the failure window of the one before, so their 401s do not add up to a 429.
  beforeEach(() => service.clock.advance(61_000));

  test('when the challenge is signed with ssh-keygen -Y sign then a fresh svc_ token signs the developer in', async () => {
    const signed = await signedChallenge(key);
    const token = await exchange(signed.id, signed.signature);
    assert.equal(token.status, 201);
    assert.match(token.body.access_token, /^svc_[A-Za-z0-9_-]{40,}$/);
    assert.equal(token.body.token_type, 'Bearer');

    const me = await call(url, 'GET', '/api/v1/dev/me', { token: token.body.access_token });
    assert.equal(me.status, 200);
    assert.equal(me.body.account.email, developer.email);
    assert.deepEqual(me.body.account.roles, ['developer']);
    assert.equal(me.body.token.source, 'ssh_key');
    assert.equal(me.body.token.key_fingerprint, fingerprint(parsePublicKeyLine(key.publicLine)));
  });

  test('when the challenge is signed by the CLI signing code then it signs in too, each time with a new token', async () => {
    const signer = parsePrivateKey(readFileSync(key.privatePath, 'utf8'));
    const tokens = new Set<string>();
    for (let i = 0; i < 2; i++) {
      const issued = await challenge(key.publicLine);
      const token = await exchange(
        issued.body.challenge_id,
        await signSshsig(issued.body.message, signer, 'svc-login'),
      );
      assert.equal(token.status, 201, JSON.stringify(token.body));
      tokens.add(token.body.access_token);
    }
    assert.equal(tokens.size, 2);
  });

  test('when a challenge is issued then its message binds the nonce, the audience, the key and a 2-minute expiry', async () => {
    const issued = await challenge(key.publicLine);
    assert.equal(issued.status, 201);
    assert.equal(issued.body.namespace, 'svc-login');
    const lines = issued.body.message.split('\n');
    assert.equal(lines.length, 6);
    assert.equal(lines[0], 'svc-login');
    assert.equal(lines[1], `challenge: ${issued.body.challenge_id}`);
    const nonce = /^nonce: ([A-Za-z0-9_-]+)$/.exec(lines[2])?.[1] ?? '';
    assert.equal(Buffer.from(nonce, 'base64url').length, 32);
    assert.equal(lines[3], `audience: ${url}`);
    assert.equal(lines[4], `fingerprint: ${fingerprint(parsePublicKeyLine(key.publicLine))}`);
    const expires = Date.parse(lines[5].replace('expires: ', ''));
    assert.equal(expires, Date.parse(issued.body.expires_at));
    assert.ok(expires - service.clock.now <= 120_000 && expires > service.clock.now);

    const again = await challenge(key.publicLine);
    assert.notEqual(again.body.message.split('\n')[2], lines[2], 'every challenge has its own nonce');
  });

  test('when the service has no public URL and is called as localhost then the challenge is for localhost, and for nothing else', async () => {
    const port = new URL(url).port;
    const audienceFor = async (host: string) => {
      const issued = await call(url, 'POST', '/api/v1/auth/challenges', {
        body: { public_key: key.publicLine },
        headers: { host },
      });
      assert.equal(issued.status, 201, JSON.stringify(issued.body));
      return issued.body.message.split('\n')[3];
    };
    assert.equal(await audienceFor(`localhost:${port}`), `audience: http://localhost:${port}`);
    assert.equal(await audienceFor(`127.0.0.1:${port}`), `audience: http://127.0.0.1:${port}`);
    // Another host, another port, or a loopback name with a trick in it: the service's own URL.
    for (const host of [
      'evil.example.com',
      `localhost:${Number(port) + 1}`,
      `evil.example.com:${port}`,
      'localhost',
    ]) {
      assert.equal(await audienceFor(host), `audience: ${url}`, host);
    }
  });

  test('when SVC_PUBLIC_URL is set then every challenge is for it, whatever Host the client sends', async () => {
    const behindProxy = await startTestService({ SVC_PUBLIC_URL: 'https://svc.example.com' });
    try {
      const issued = await call(behindProxy.url, 'POST', '/api/v1/auth/challenges', {
        body: { public_key: key.publicLine },
        headers: { host: `localhost:${new URL(behindProxy.url).port}` },
      });
      assert.equal(issued.body.message.split('\n')[3], 'audience: https://svc.example.com');
    } finally {
      await behindProxy.stop();
    }
  });

  test('when a signed challenge is exchanged a second time then 401', async () => {
    const signed = await signedChallenge(key);
    assert.equal((await exchange(signed.id, signed.signature)).status, 201);
    const replay = await exchange(signed.id, signed.signature);
    assert.equal(replay.status, 401);
    assert.equal(replay.body.code, 'unauthorized');
  });

  test('when the challenge has expired then 401', async () => {
    const signed = await signedChallenge(key);
    service.clock.advance(120_001);
    assert.equal((await exchange(signed.id, signed.signature)).status, 401);
  });

  test('when the signature is in another namespace then 401', async () => {
    const signed = await signedChallenge(key, { namespace: 'file' });
    assert.equal((await exchange(signed.id, signed.signature)).status, 401);
  });

  test('when another key signs the challenge then 401, even when that key is registered too', async () => {
    const other = kit.makeKey();
    await registerKey(url, developer, other.publicLine);
    const signed = await signedChallenge(key, { signer: other });
    assert.equal((await exchange(signed.id, signed.signature)).status, 401);
  });

  test('when the signed message is altered then 401', async () => {
    const issued = await challenge(key.publicLine);
    const altered = issued.body.message.replace(/audience: .*/, 'audience: https://evil.example.com');
    assert.equal((await exchange(issued.body.challenge_id, kit.sign(key, altered))).status, 401);
  });

  test('when the key is removed after the challenge was issued then 401', async () => {
    const doomed = kit.makeKey();
    const registered = await registerKey(url, developer, doomed.publicLine);
    const signed = await signedChallenge(doomed);
    const removed = await call(url, 'DELETE', `/api/v1/dev/keys/${registered.id}`, {
      token: developer.token,
    });
    assert.equal(removed.status, 204, JSON.stringify(removed.body));
    assert.equal((await exchange(signed.id, signed.signature)).status, 401);
  });

  test('when the key is not ed25519 then the challenge is refused with 422 naming its type', async () => {
    for (const type of ['rsa', 'ecdsa'] as const) {
      const refused = await challenge(kit.makeKey(type).publicLine);
      assert.equal(refused.status, 422);
      assert.equal(refused.body.code, 'unsupported_key_type');
      assert.match(refused.body.detail, type === 'rsa' ? /ssh-rsa/ : /ecdsa-sha2-nistp256/);
    }
  });

  test('when two exchanges of one challenge race then exactly one gets a token', async () => {
    const signed = await signedChallenge(key);
    const results = await Promise.all([1, 2, 3].map(() => exchange(signed.id, signed.signature)));
    assert.deepEqual(results.map((r) => r.status).sort(), [201, 401, 401]);
  });

  test('when the key is unknown or the signature bad then the 401s are the same', async () => {
    const stranger = kit.makeKey();
    const unknown = await signedChallenge(stranger);
    const unknownReply = await exchange(unknown.id, unknown.signature);
    const bad = await signedChallenge(key, { signer: stranger });
    const badReply = await exchange(bad.id, bad.signature);
    assert.equal(unknownReply.status, 401);
    assert.deepEqual(unknownReply.body, badReply.body);
  });

  test('when one key fails ten times within a minute then that key gets 429 with Retry-After, from anywhere', async () => {
    const target = kit.makeKey();
    await registerKey(url, developer, target.publicLine);
    const stranger = kit.makeKey();
    for (let i = 0; i < 10; i++) {
      const bad = await signedChallenge(target, { signer: stranger });
      assert.equal((await exchange(bad.id, bad.signature)).status, 401);
    }
    const limited = await challenge(target.publicLine, '127.0.0.2');
    assert.equal(limited.status, 429);
    assert.equal(limited.body.code, 'rate_limited');
    const retryAfter = Number(limited.headers['retry-after']);
    assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
    assert.equal((await challenge(key.publicLine, '127.0.0.2')).status, 201, 'other keys are not held back');

    service.clock.advance(61_000);
    assert.equal(
      (await challenge(target.publicLine, '127.0.0.2')).status,
      201,
      'the limit lifts after a minute',
    );
  });

  test('when one address fails ten times within a minute then it gets 429, and other addresses do not', async () => {
    for (let i = 0; i < 10; i++) {
      const stranger = kit.makeKey();
      const issued = await challenge(stranger.publicLine, '127.0.0.3');
      const reply = await exchange(
        issued.body.challenge_id,
        kit.sign(stranger, issued.body.message),
        '127.0.0.3',
      );
      assert.equal(reply.status, 401);
    }
    const signed = await signedChallenge(key);
    const limited = await exchange(signed.id, signed.signature, '127.0.0.3');
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers['retry-after']) >= 1);
    assert.equal((await exchange(signed.id, signed.signature, '127.0.0.4')).status, 201);
  });
});
