import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, registerKey, signInWithKey, signUpDeveloper } from './support/accounts.ts';
import { call } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';
import { type KeyFiles, SshKit } from './support/ssh.ts';

describe('SSH keys', () => {
  const kit = new SshKit();
  let service: TestService;
  let url: string;
  let developer: Developer;

  beforeAll(async () => {
    service = await startTestService();
    url = service.url;
    developer = await signUpDeveloper(url);
  });
  afterAll(async () => {
    await service.stop();
    kit.cleanup();
  });

  const login = (key: KeyFiles) => signInWithKey(url, key);

  test('when a key is added then it is listed with its id, fingerprint, title and times', async () => {
    const key = kit.makeKey();
    const added = await registerKey(url, developer, key.publicLine);
    const fingerprintLine = kit.fingerprint(key);
    assert.equal(added.fingerprint, fingerprintLine);
    const listed = await call(url, 'GET', '/api/v1/dev/keys', { token: developer.token });
    assert.equal(listed.status, 200);
    const [entry] = listed.body.keys;
    assert.equal(entry.id, added.id);
    assert.equal(entry.type, 'ssh-ed25519');
    assert.equal(entry.title, 'test@ed25519', 'the comment is the default title');
    assert.equal(entry.public_key, key.publicLine.split(' ').slice(0, 2).join(' '));
    assert.equal(entry.last_used_at, null);
    await login(key);
    const used = await call(url, 'GET', '/api/v1/dev/keys', { token: developer.token });
    assert.notEqual(used.body.keys[0].last_used_at, null);
  });

  test('when a key is given a title then it keeps that title', async () => {
    const key = kit.makeKey();
    const added = await call(url, 'POST', '/api/v1/dev/keys', {
      token: developer.token,
      body: { public_key: key.publicLine, title: 'CI runner' },
    });
    assert.equal(added.body.title, 'CI runner');
  });

  test('when the same key is added twice, by anyone, then 409', async () => {
    const key = kit.makeKey();
    await registerKey(url, developer, key.publicLine);
    const again = await call(url, 'POST', '/api/v1/dev/keys', {
      token: developer.token,
      body: { public_key: key.publicLine },
    });
    assert.equal(again.status, 409);
    assert.equal(again.body.code, 'key_exists');
    const other = await signUpDeveloper(url);
    const elsewhere = await call(url, 'POST', '/api/v1/dev/keys', {
      token: other.token,
      body: { public_key: key.publicLine },
    });
    assert.equal(elsewhere.status, 409);
  });

  test('when the key is not ssh-ed25519 then 422 naming its type, and nothing is stored', async () => {
    const before = (await call(url, 'GET', '/api/v1/dev/keys', { token: developer.token })).body.keys.length;
    for (const [type, name] of [
      ['rsa', 'ssh-rsa'],
      ['ecdsa', 'ecdsa-sha2-nistp256'],
    ] as const) {
      const reply = await call(url, 'POST', '/api/v1/dev/keys', {
        token: developer.token,
        body: { public_key: kit.makeKey(type).publicLine },
      });
      assert.equal(reply.status, 422);
      assert.equal(reply.body.code, 'unsupported_key_type');
      assert.match(reply.body.detail, new RegExp(name));
    }
    const garbage = await call(url, 'POST', '/api/v1/dev/keys', {
      token: developer.token,
      body: { public_key: 'ssh-ed25519 not-base64!' },
    });
    assert.equal(garbage.status, 422);
    assert.equal(garbage.body.code, 'malformed_key');
    const after = (await call(url, 'GET', '/api/v1/dev/keys', { token: developer.token })).body.keys.length;
    assert.equal(after, before);
  });

  test('when a key is removed then it cannot sign in and its tokens end, while the other key and its tokens go on', async () => {
    const owner = await signUpDeveloper(url);
    const first = kit.makeKey();
    const second = kit.makeKey();
    const firstKey = await registerKey(url, owner, first.publicLine);
    await registerKey(url, owner, second.publicLine);
    const firstToken = await login(first);
    const secondToken = await login(second);
    assert.equal(typeof firstToken, 'string');

    const removed = await call(url, 'DELETE', `/api/v1/dev/keys/${firstKey.id}`, { token: owner.token });
    assert.equal(removed.status, 204);

    assert.equal(await login(first), 401);
    assert.equal((await call(url, 'GET', '/api/v1/dev/me', { token: String(firstToken) })).status, 401);
    assert.equal((await call(url, 'GET', '/api/v1/dev/me', { token: String(secondToken) })).status, 200);
    assert.equal((await call(url, 'GET', '/api/v1/dev/me', { token: owner.token })).status, 200);
    const keys = (await call(url, 'GET', '/api/v1/dev/keys', { token: owner.token })).body.keys;
    assert.equal(keys.length, 1);
  });

  test('when a developer removes a key that is not theirs then 404 and the key stays', async () => {
    const key = kit.makeKey();
    const added = await registerKey(url, developer, key.publicLine);
    const stranger = await signUpDeveloper(url);
    const reply = await call(url, 'DELETE', `/api/v1/dev/keys/${added.id}`, { token: stranger.token });
    assert.equal(reply.status, 404);
    assert.equal(typeof (await login(key)), 'string');
  });

  test('when the key routes are called without a token then 401', async () => {
    assert.equal((await call(url, 'GET', '/api/v1/dev/keys')).status, 401);
    assert.equal((await call(url, 'POST', '/api/v1/dev/keys', { body: { public_key: 'x' } })).status, 401);
  });
});
