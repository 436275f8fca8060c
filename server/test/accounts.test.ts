import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';

describe('accounts', () => {
  let service: TestService;
  let url: string;
  const password = 'correct horse battery staple';

  before(async () => {
    service = await startTestService({ SVC_ADMIN_EMAILS: 'root@example.com' });
    url = service.url;
  });
  after(() => service.stop());

  const signUp = (email: string, pass = password, name = 'Ada') =>
    call(url, 'POST', '/api/v1/account/signup', { body: { email, password: pass, name } });
  const signIn = (email: string, pass = password) =>
    call(url, 'POST', '/api/v1/account/sessions', { body: { email, password: pass } });

  test('when a developer signs up then the account is made with a lower-cased email and the developer role', async () => {
    const reply = await signUp('  Ada@Example.COM ');
    assert.equal(reply.status, 400, 'an email with spaces is not an email');
    const made = await signUp('Ada@Example.COM');
    assert.equal(made.status, 201);
    assert.equal(made.body.email, 'ada@example.com');
    assert.deepEqual(made.body.roles, ['developer']);
  });

  test('when the same email signs up again in another case then 409', async () => {
    const again = await signUp('ADA@example.com');
    assert.equal(again.status, 409);
    assert.equal(again.body.code, 'email_taken');
  });

  test('when the password is shorter than 12 characters then 400 naming the field', async () => {
    const reply = await signUp('short@example.com', 'tooshort');
    assert.equal(reply.status, 400);
    assert.equal(reply.body.errors[0].path, '/body/password');
  });

  test('when the name is blank then 400 and no account is made', async () => {
    assert.equal((await signUp('blank@example.com', password, '   ')).status, 400);
    assert.equal(
      (await signUp('blank@example.com')).status,
      201,
      'the email was not taken by the failed sign-up',
    );
  });

  test('when the password is stored then only a salted scrypt hash is kept', async () => {
    await signUp('twin1@example.com');
    await signUp('twin2@example.com');
    const rows = await service.store
      .db('accounts')
      .whereIn('email', ['twin1@example.com', 'twin2@example.com']);
    const hashes = rows.map((row: { password_hash: string }) => row.password_hash);
    for (const hash of hashes) {
      assert.match(hash, /^scrypt\$\d+\$\d+\$\d+\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
      assert.ok(!hash.includes(password));
    }
    assert.notEqual(hashes[0], hashes[1], 'the same password gives different hashes');
  });

  test('when the developer signs in with the password then a web-session token is returned', async () => {
    const session = await signIn('ADA@example.com');
    assert.equal(session.status, 201);
    const me = await call(url, 'GET', '/api/v1/dev/me', { token: session.body.access_token });
    assert.equal(me.body.account.email, 'ada@example.com');
    assert.equal(me.body.token.source, 'web_session');
    assert.equal(me.body.token.key_fingerprint, undefined);
  });

  test('when the password or the email is wrong then the same 401', async () => {
    const wrongPassword = await signIn('ada@example.com', 'not the password at all');
    const unknownEmail = await signIn('nobody@example.com');
    assert.equal(wrongPassword.status, 401);
    assert.deepEqual({ ...wrongPassword.body, instance: '' }, { ...unknownEmail.body, instance: '' });
  });

  test('when many wrong passwords arrive at once then at most ten are checked, the rest get 429', async () => {
    await signUp('burst@example.com');
    const replies = await Promise.all(
      Array.from({ length: 30 }, () => signIn('burst@example.com', 'not the password at all')),
    );
    const statuses = replies.map((reply) => reply.status);
    assert.ok(statuses.filter((status) => status === 401).length <= 10, statuses.join(' '));
    assert.ok(statuses.filter((status) => status === 429).length >= 20, statuses.join(' '));
    service.clock.advance(61_000);
  });

  test('when an admin email signs up then the account has the admin role', async () => {
    const made = await signUp('Root@Example.com');
    assert.deepEqual(made.body.roles, ['developer', 'admin']);
  });

  test('when sign-up is closed then 403 and no account is made', async () => {
    const closed = await startTestService({ SVC_SIGNUP: 'closed' }, { store: service.store });
    try {
      const reply = await call(closed.url, 'POST', '/api/v1/account/signup', {
        body: { email: 'late@example.com', password, name: 'Late' },
      });
      assert.equal(reply.status, 403);
      assert.equal(reply.body.code, 'signup_closed');
      assert.equal(
        await service.store.db('accounts').where({ email: 'late@example.com' }).first(),
        undefined,
      );
    } finally {
      await closed.stop();
    }
  });
});
