/** What the web console does for a new developer: sign up, sign in with the password, paste a key. */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { call } from './http.ts';

export interface Developer {
  email: string;
  password: string;
  token: string;
  accountId: string;
}

export async function signUpDeveloper(
  base: string,
  email = `dev-${randomBytes(4).toString('hex')}@example.com`,
) {
  const password = 'correct horse battery staple';
  const signup = await call(base, 'POST', '/api/v1/account/signup', {
    body: { email, password, name: 'Ada' },
  });
  assert.equal(signup.status, 201, JSON.stringify(signup.body));
  const session = await call(base, 'POST', '/api/v1/account/sessions', { body: { email, password } });
  assert.equal(session.status, 201, JSON.stringify(session.body));
  return { email, password, token: session.body.access_token, accountId: signup.body.id } as Developer;
}

export async function registerKey(base: string, developer: Developer, publicKeyLine: string) {
  const added = await call(base, 'POST', '/api/v1/dev/keys', {
    token: developer.token,
    body: { public_key: publicKeyLine },
  });
  assert.equal(added.status, 201, JSON.stringify(added.body));
  return added.body as { id: string; fingerprint: string };
}
