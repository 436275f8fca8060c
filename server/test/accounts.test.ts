import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { call } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';

describe('accounts', () => {
  let service: TestService;
  let url: string;
  const password = 'correct horse battery staple';

  beforeAll(async () => {
    service = await startTestService({ SVC_ADMIN_EMAILS: 'root@example.com' });
    url = service.url;
  });
  afterAll(() => service.stop());

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

  test('when the password is only spaces then 400 at the password, and no account is made', async () => {
    const reply = await signUp('spaces@example.com', ' '.repeat(16));
    assert.equal(reply.status, 400);
    assert.deepEqual(reply.body.errors, [{ path: '/body/password', message: 'must not be only spaces' }]);
    assert.equal((await signUp('spaces@example.com')).status, 201);
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

  test('when ten wrong passwords for an email come from one address then that address waits, and the owner signs in from another', async () => {
    await signUp('owner@example.com');
    const guess = (from: string) =>
      call(url, 'POST', '/api/v1/account/sessions', {
        body: { email: 'owner@example.com', password: 'not the password at all' },
        from,
      });
    for (let i = 0; i < 10; i += 1) assert.equal((await guess('127.0.0.20')).status, 401);
    const blocked = await guess('127.0.0.20');
    assert.equal(blocked.status, 429);
    assert.ok(Number(blocked.headers['retry-after']) > 0);
    const owner = await call(url, 'POST', '/api/v1/account/sessions', {
      body: { email: 'owner@example.com', password },
      from: '127.0.0.21',
    });
    assert.equal(owner.status, 201, JSON.stringify(owner.body));
    service.clock.advance(16 * 60_000);
  });

  test('when wrong passwords for one account come from many addresses then the account waits, and is let in after the window', async () => {
    await signUp('target@example.com');
    for (let address = 30; address < 40; address += 1) {
      for (let i = 0; i < 5; i += 1) {
        const reply = await call(url, 'POST', '/api/v1/account/sessions', {
          body: { email: 'target@example.com', password: 'not the password at all' },
          from: `127.0.0.${address}`,
        });
        assert.equal(reply.status, 401);
      }
    }
    const locked = await call(url, 'POST', '/api/v1/account/sessions', {
      body: { email: 'target@example.com', password },
      from: '127.0.0.41',
    });
    assert.equal(locked.status, 429);
    assert.match(locked.body.detail, /for this account/);
    service.clock.advance(16 * 60_000);
    const later = await call(url, 'POST', '/api/v1/account/sessions', {
      body: { email: 'target@example.com', password },
      from: '127.0.0.41',
    });
    assert.equal(later.status, 201);
  });

  test('when one address makes 40 accounts at once then at most 20 are made and the rest get 429', async () => {
    const replies = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        call(url, 'POST', '/api/v1/account/signup', {
          body: { email: `bulk-${i}@example.com`, password, name: 'Bulk' },
          from: '127.0.0.50',
        }),
      ),
    );
    const statuses = replies.map((reply) => reply.status);
    assert.ok(statuses.filter((status) => status === 201).length <= 20, statuses.join(' '));
    assert.ok(statuses.filter((status) => status === 429).length >= 20, statuses.join(' '));
    const made = await service.store.db('accounts').where('email', 'like', 'bulk-%').count({ n: '*' });
    assert.ok(Number(made[0]?.n) <= 20);
    const elsewhere = await call(url, 'POST', '/api/v1/account/signup', {
      body: { email: 'elsewhere@example.com', password, name: 'Else' },
      from: '127.0.0.51',
    });
    assert.equal(elsewhere.status, 201);
  });

  describe('admins', () => {
    const me = async (token: string) =>
      (await call(url, 'GET', '/api/v1/dev/me', { token })).body.account.roles as string[];
    const claim = (token: string, code: string) =>
      call(url, 'POST', '/api/v1/account/admin-claims', { token, body: { code } });
    const codeFor = (email: string) => service.adminCodes.find((c) => c.email === email)?.code ?? '';

    test('when the service starts then it has a one-time code for each listed email, and for no other', () => {
      assert.deepEqual(
        service.adminCodes.map((c) => c.email),
        ['root@example.com'],
      );
      assert.match(codeFor('root@example.com'), /^svcadmin_[A-Za-z0-9_-]{43}$/);
    });

    test('when anyone signs up with a listed admin email, in any case, then the account is no admin', async () => {
      const made = await signUp('ROOT@Example.COM');
      assert.equal(made.status, 201, JSON.stringify(made.body));
      assert.deepEqual(made.body.roles, ['developer']);
      const session = await signIn('root@example.com');
      assert.deepEqual(await me(session.body.access_token), ['developer']);
      const queue = await call(url, 'GET', '/api/v1/admin/review-queue', {
        token: session.body.access_token,
      });
      assert.equal(queue.status, 403);
    });

    test('when a wrong code, or the code of another email, is claimed then 422 and the role stays away', async () => {
      const root = (await signIn('root@example.com')).body.access_token;
      const wrong = await claim(root, `svcadmin_${'A'.repeat(43)}`);
      assert.equal(wrong.status, 422);
      assert.equal(wrong.body.code, 'admin_code_invalid');
      const other = (await signUp('other@example.com')).status === 201 && (await signIn('other@example.com'));
      assert.ok(other);
      const stolen = await claim(other.body.access_token, codeFor('root@example.com'));
      assert.equal(stolen.status, 422);
      assert.match(stolen.body.detail, /SVC_ADMIN_EMAILS/);
      assert.deepEqual(await me(root), ['developer']);
    });

    test('when the listed account claims its code then it is an admin at once, and the code works only once', async () => {
      const root = (await signIn('root@example.com')).body.access_token;
      const claimed = await claim(root, codeFor('root@example.com'));
      assert.equal(claimed.status, 200, JSON.stringify(claimed.body));
      assert.deepEqual(claimed.body.roles, ['developer', 'admin']);
      assert.deepEqual(await me(root), ['developer', 'admin']);
      assert.equal((await call(url, 'GET', '/api/v1/admin/review-queue', { token: root })).status, 200);
      assert.equal((await claim(root, codeFor('root@example.com'))).status, 422);
    });

    test('when the service restarts then a claimed admin gets no new code and stays admin', async () => {
      const again = await startTestService(
        { SVC_ADMIN_EMAILS: 'root@example.com,new@example.com' },
        { store: service.store },
      );
      try {
        assert.deepEqual(
          again.adminCodes.map((c) => c.email),
          ['new@example.com'],
        );
        const root = await call(again.url, 'POST', '/api/v1/account/sessions', {
          body: { email: 'root@example.com', password },
        });
        const roles = (await call(again.url, 'GET', '/api/v1/dev/me', { token: root.body.access_token })).body
          .account.roles;
        assert.deepEqual(roles, ['developer', 'admin']);
      } finally {
        await again.stop();
      }
    });

    test('when the operator takes the email off the list then the claimed account is no admin any more', async () => {
      const unlisted = await startTestService({}, { store: service.store });
      try {
        const root = await call(unlisted.url, 'POST', '/api/v1/account/sessions', {
          body: { email: 'root@example.com', password },
        });
        const roles = (await call(unlisted.url, 'GET', '/api/v1/dev/me', { token: root.body.access_token }))
          .body.account.roles;
        assert.deepEqual(roles, ['developer']);
      } finally {
        await unlisted.stop();
      }
    });
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
