/** What the web console does for a new developer: sign up, sign in with the password, paste a key. */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parsePrivateKey, signSshsig } from '@svc/ssh';
import { call } from './http.ts';
import type { KeyFiles } from './ssh.ts';

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

/** An account listed in the service's SVC_ADMIN_EMAILS, signed up and with its admin code claimed. */
export async function signUpAdmin(
  service: { url: string; adminCodes: { email: string; code: string }[] },
  email: string,
) {
  const admin = await signUpDeveloper(service.url, email);
  const code = service.adminCodes.find((c) => c.email === email)?.code;
  assert.ok(code, `the service printed no admin code for ${email}: is it in SVC_ADMIN_EMAILS?`);
  const claimed = await call(service.url, 'POST', '/api/v1/account/admin-claims', {
    token: admin.token,
    body: { code },
  });
  assert.equal(claimed.status, 200, JSON.stringify(claimed.body));
  return admin;
}

export async function registerKey(base: string, developer: Developer, publicKeyLine: string) {
  const added = await call(base, 'POST', '/api/v1/dev/keys', {
    token: developer.token,
    body: { public_key: publicKeyLine },
  });
  assert.equal(added.status, 201, JSON.stringify(added.body));
  return added.body as { id: string; fingerprint: string };
}

/** `svc login` over HTTP with the CLI's signing code: the access token, or the status that refused it. */
export async function signInWithKey(base: string, key: KeyFiles): Promise<string | number> {
  const issued = await call(base, 'POST', '/api/v1/auth/challenges', {
    body: { public_key: key.publicLine },
  });
  if (issued.status !== 201) return issued.status;
  const signer = parsePrivateKey(readFileSync(key.privatePath, 'utf8'));
  const signature = await signSshsig(issued.body.message, signer, 'svc-login');
  const token = await call(base, 'POST', '/api/v1/auth/tokens', {
    body: { challenge_id: issued.body.challenge_id, signature },
  });
  return token.status === 201 ? token.body.access_token : token.status;
}
