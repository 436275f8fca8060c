/**
 * Text the store cannot hold (NUL, unpaired surrogates) or a person should not be shown (control
 * characters): refused with 422 wherever it comes in, never a 500 and never a half-written record.
 */
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpDeveloper } from './support/accounts.ts';
import { call, type Reply } from './support/http.ts';
import { makePackage, manifestFor } from './support/packages.ts';
import { startTestService, type TestService } from './support/service.ts';
import { SshKit } from './support/ssh.ts';

describe('hostile text', () => {
  let service: TestService;
  let url: string;
  let developer: Developer;
  const kit = new SshKit();

  beforeAll(async () => {
    service = await startTestService();
    url = service.url;
    developer = await signUpDeveloper(url);
  });
  afterAll(async () => {
    await service.stop();
    kit.cleanup();
  });

  function assertRefused(reply: Reply, pointer: string, code = 'invalid_text') {
    assert.equal(reply.status, 422, JSON.stringify(reply.body));
    assert.match(String(reply.headers['content-type']), /^application\/problem\+json/);
    assert.equal(reply.body.code, code);
    assert.ok(
      reply.body.errors?.some((error: { path: string }) => error.path === pointer),
      `names ${pointer}: ${JSON.stringify(reply.body)}`,
    );
  }

  const signUp = (fields: Record<string, string>) =>
    call(url, 'POST', '/api/v1/account/signup', {
      body: { email: 'text@example.com', password: 'correct horse battery staple', name: 'Ada', ...fields },
    });

  const hostile = [
    ['a NUL', 'a\u0000b'],
    ['a bell', 'a\u0007b'],
    ['an escape sequence', 'red \u001b[31m'],
    ['a line break', 'two\nlines'],
    ['a C1 control', 'a\u0085b'],
    ['an unpaired surrogate', 'x\ud800'],
  ] as const;

  for (const [what, name] of hostile) {
    test(`when a sign-up name holds ${what} then 422 invalid_text names the field and no account is made`, async () => {
      assertRefused(await signUp({ name }), '/body/name');
      const session = await call(url, 'POST', '/api/v1/account/sessions', {
        body: { email: 'text@example.com', password: 'correct horse battery staple' },
      });
      assert.equal(session.status, 401, 'the account was not made');
    });
  }

  test('when a NUL or an unpaired surrogate is in a field that is not free text then it is refused too', async () => {
    assertRefused(await signUp({ email: 'a\u0000@example.com' }), '/body/email');
    assertRefused(await signUp({ email: 'a\udc00@example.com' }), '/body/email');
    assertRefused(await signUp({ password: 'correct horse\u0000battery' }), '/body/password');
  });

  test('when a member name holds a NUL then the body is refused, naming it', async () => {
    const reply = await call(url, 'POST', '/api/v1/account/signup', {
      raw: '{"email":"text@example.com","password":"correct horse battery staple","name":"Ada","n\\u0000":1}',
    });
    assertRefused(reply, '/body/n\u0000');
  });

  test('when ordinary text has accents, other scripts and emoji then it is kept as written', async () => {
    const name = 'Zoë Ångström 日本 😀';
    const reply = await signUp({ email: 'zoe@example.com', name });
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    assert.equal(reply.body.name, name);
  });

  test('when an SSH key title holds a NUL or a control character then 422 and the key is not added', async () => {
    const key = kit.makeKey();
    for (const title of ['laptop\u0000', 'laptop\u001b[2J', 'x\ud83d']) {
      const reply = await call(url, 'POST', '/api/v1/dev/keys', {
        token: developer.token,
        body: { public_key: key.publicLine, title },
      });
      assertRefused(reply, '/body/title');
    }
    const keys = await call(url, 'GET', '/api/v1/dev/keys', { token: developer.token });
    assert.deepEqual(keys.body.keys, []);
  });

  async function submit(manifest: unknown) {
    const pkg = makePackage(manifest);
    const target = await call(url, 'POST', '/api/v1/mini-apps/upload-url', {
      token: developer.token,
      body: { app_id: pkg.appId, version: pkg.version, size: pkg.size, sha256: pkg.sha256 },
    });
    assert.equal(target.status, 201, JSON.stringify(target.body));
    const put = await fetch(target.body.upload_url, {
      method: 'PUT',
      headers: { 'content-type': 'application/gzip' },
      body: pkg.bytes,
    });
    assert.equal(put.status, 201);
    return call(url, 'POST', '/api/v1/mini-apps/submit', {
      token: developer.token,
      body: { upload_id: target.body.upload_id },
    });
  }

  for (const [what, name] of hostile) {
    test(`when a manifest name holds ${what} then submit is 422 manifest_invalid and nothing is listed`, async () => {
      const reply = await submit(manifestFor('com.example.hostile', '1.0.0', { name }));
      assertRefused(reply, '/manifest/name', 'manifest_invalid');
      const mine = await call(url, 'GET', '/api/v1/mini-apps/mine', { token: developer.token });
      assert.deepEqual(mine.body.mini_apps, []);
    });
  }

  test('when a manifest field that is not free text holds a NUL then submit is 422 manifest_invalid', async () => {
    const reply = await submit(manifestFor('com.example.hostile', '1.0.0', { brands: ['brand_a\u0000'] }));
    assertRefused(reply, '/manifest/brands/0', 'manifest_invalid');
  });
});
