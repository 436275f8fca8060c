import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { registerKey, signInWithKey, signUpDeveloper } from './support/accounts.ts';
import { call } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';
import { type KeyFiles, SshKit } from './support/ssh.ts';

describe('access tokens', () => {
  const kit = new SshKit();
  let service: TestService;
  let replica: TestService;

  beforeAll(async () => {
    service = await startTestService({ SVC_TOKEN_TTL: '15m' });
    // A second API process on the same store, as behind a load balancer.
    replica = await startTestService({ SVC_TOKEN_TTL: '15m' }, { store: service.store });
  });
  afterAll(async () => {
    await replica.stop();
    await service.stop();
    kit.cleanup();
  });

  async function login(url: string, key: KeyFiles): Promise<string> {
    const token = await signInWithKey(url, key);
    assert.equal(typeof token, 'string', `sign-in refused with ${token}`);
    return String(token);
  }

  test('when a token is minted then only its SHA-256 is stored', async () => {
    const developer = await signUpDeveloper(service.url);
    const rows = await service.store.db('access_tokens').where({ account_id: developer.accountId });
    assert.equal(rows.length, 1);
    assert.equal(rows[0].token_hash, createHash('sha256').update(developer.token).digest('hex'));
    assert.ok(!JSON.stringify(rows).includes(developer.token));
  });

  test('when SVC_TOKEN_TTL is 15m then the token works for 15 minutes and not after', async () => {
    const developer = await signUpDeveloper(service.url);
    const me = await call(service.url, 'GET', '/api/v1/dev/me', { token: developer.token });
    assert.equal(Date.parse(me.body.token.expires_at) - service.clock.now, 15 * 60_000);
    service.clock.advance(15 * 60_000 - 1_000);
    assert.equal((await call(service.url, 'GET', '/api/v1/dev/me', { token: developer.token })).status, 200);
    service.clock.advance(1_000);
    assert.equal((await call(service.url, 'GET', '/api/v1/dev/me', { token: developer.token })).status, 401);
  });

  test('when a token is checked again within 5 seconds then no database query is made for it', async () => {
    const developer = await signUpDeveloper(service.url);
    const queries: string[] = [];
    const listener = (query: { sql: string }) => queries.push(query.sql);
    service.store.db.on('query', listener);
    try {
      for (let i = 0; i < 5; i++) {
        assert.equal(
          (await call(service.url, 'GET', '/api/v1/dev/me', { token: developer.token })).status,
          200,
        );
      }
    } finally {
      service.store.db.removeListener('query', listener);
    }
    assert.ok(queries.filter((sql) => sql.includes('access_tokens')).length <= 1, queries.join('\n'));
  });

  test('when a key is removed through another replica then its tokens stop working here within 5 seconds', async () => {
    const developer = await signUpDeveloper(service.url);
    const key = kit.makeKey();
    const registered = await registerKey(service.url, developer, key.publicLine);
    const token = await login(service.url, key);
    assert.equal((await call(service.url, 'GET', '/api/v1/dev/me', { token })).status, 200);

    const removed = await call(replica.url, 'DELETE', `/api/v1/dev/keys/${registered.id}`, {
      token: developer.token,
    });
    assert.equal(removed.status, 204);
    assert.equal(
      (await call(replica.url, 'GET', '/api/v1/dev/me', { token })).status,
      401,
      'at once on the replica',
    );

    service.clock.advance(5_000);
    assert.equal(
      (await call(service.url, 'GET', '/api/v1/dev/me', { token })).status,
      401,
      'within 5 s here',
    );
  });

  test("when a session is ended (sign-out) then its token stops working, here at once and on a replica within 5 seconds, and the account's other sessions go on", async () => {
    const developer = await signUpDeveloper(service.url);
    const other = await call(service.url, 'POST', '/api/v1/account/sessions', {
      body: { email: developer.email, password: developer.password },
    });
    const otherToken = other.body.access_token as string;
    assert.equal((await call(replica.url, 'GET', '/api/v1/dev/me', { token: developer.token })).status, 200);

    const ended = await call(service.url, 'DELETE', '/api/v1/account/sessions/current', {
      token: developer.token,
    });
    assert.equal(ended.status, 204);
    assert.equal((await call(service.url, 'GET', '/api/v1/dev/me', { token: developer.token })).status, 401);
    replica.clock.advance(5_000);
    assert.equal((await call(replica.url, 'GET', '/api/v1/dev/me', { token: developer.token })).status, 401);
    assert.equal((await call(service.url, 'GET', '/api/v1/dev/me', { token: otherToken })).status, 200);
    // Twice is a 401, as for any token that no longer works.
    const again = await call(service.url, 'DELETE', '/api/v1/account/sessions/current', {
      token: developer.token,
    });
    assert.equal(again.status, 401);
  });

  test('when tokens have been used then none of them appears in the logs', async () => {
    const developer = await signUpDeveloper(service.url);
    await call(service.url, 'GET', '/api/v1/dev/me', { token: developer.token });
    await call(service.url, 'GET', '/api/v1/dev/me', { token: `${developer.token}x` });
    assert.ok(!service.logs.join('\n').includes('svc_'));
  });

  test('when no bearer token is sent then 401 with WWW-Authenticate: Bearer', async () => {
    for (const header of ['Basic YWRhOnB3', 'Bearer', 'Bearer ']) {
      const reply = await call(service.url, 'GET', '/api/v1/dev/me', { headers: { authorization: header } });
      assert.equal(reply.status, 401, header);
      assert.equal(reply.headers['www-authenticate'], 'Bearer', header);
    }
    const none = await call(service.url, 'GET', '/api/v1/dev/me');
    assert.equal(none.headers['www-authenticate'], 'Bearer');
  });

  test('when a bearer token is sent and refused then 401 with WWW-Authenticate naming invalid_token', async () => {
    const developer = await signUpDeveloper(service.url);
    const wrong = `${developer.token}x`;
    service.clock.advance(service.config.tokenTtlSeconds * 1000 + 1000);
    for (const token of ['not-ours', 'svc_unknown', wrong, developer.token]) {
      const reply = await call(service.url, 'GET', '/api/v1/dev/me', { token });
      assert.equal(reply.status, 401, token);
      assert.equal(reply.headers['www-authenticate'], 'Bearer error="invalid_token"', token);
      assert.equal(reply.body.code, 'unauthorized');
    }
  });
});
