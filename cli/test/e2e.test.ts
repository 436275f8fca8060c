import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { call } from '../../server/test/support/http.ts';
import { makeKey, startAgent } from '../../server/test/support/ssh.ts';
import { type RunningService, startServiceProcess } from './support/service.ts';
import { svc, userEnv } from './support/svc.ts';

describe('svc end to end', () => {
  const home = mkdtempSync(join(tmpdir(), 'svc-home-'));
  const keys = join(home, '.ssh');
  let service: RunningService;
  let env: NodeJS.ProcessEnv;
  let first: { path: string; publicLine: string };
  let second: { path: string; publicLine: string };
  let firstKeyId = '';

  beforeAll(async () => {
    service = await startServiceProcess();
    env = userEnv(home, { SVC_API_URL: service.url });
    rmSync(keys, { recursive: true, force: true });
    mkdirSync(keys, { mode: 0o700 });
    first = makeKey(keys, 'id_ed25519');
    second = makeKey(keys, 'laptop_ed25519', { passphrase: 'open sesame' });

    // What the web console does: an account, a password session, the first key pasted in.
    const account = { email: 'ada@example.com', password: 'correct horse battery staple', name: 'Ada' };
    assert.equal((await call(service.url, 'POST', '/api/v1/account/signup', { body: account })).status, 201);
    const session = await call(service.url, 'POST', '/api/v1/account/sessions', {
      body: { email: account.email, password: account.password },
    });
    const added = await call(service.url, 'POST', '/api/v1/dev/keys', {
      token: session.body.access_token,
      body: { public_key: first.publicLine },
    });
    assert.equal(added.status, 201);
    firstKeyId = String(added.body.id);
  });

  afterAll(async () => {
    await service.stop();
    rmSync(home, { recursive: true, force: true });
  });

  test('when the developer logs in with the default key then whoami names them', async () => {
    const login = await svc(['login'], env);
    assert.equal(login.code, 0, login.stderr);
    assert.match(login.stdout, /Signed in to .* as ada@example\.com/);
    const whoami = await svc(['whoami'], env);
    assert.equal(whoami.code, 0, whoami.stderr);
    assert.match(whoami.stdout, /Ada <ada@example\.com>/);
    assert.match(
      whoami.stdout,
      /token from the (config file .*sdk\.json \(no credential store here|credential store)/,
    );
    // The file warning is said once per machine, not at every login.
    const again = await svc(['login'], env);
    assert.equal(again.code, 0, again.stderr);
    assert.doesNotMatch(again.stderr, /no credential store is available/);
    const asJson = await svc(['whoami', '--json'], env);
    assert.equal(JSON.parse(asJson.stdout).account.email, 'ada@example.com');
  });

  test('when the service runs on 127.0.0.1 with the defaults and svc is given localhost then login works', async () => {
    const localhost = service.url.replace('127.0.0.1', 'localhost');
    const login = await svc(['login', '--api-url', localhost], env);
    assert.equal(login.code, 0, login.stderr);
    assert.match(
      login.stdout,
      new RegExp(`Signed in to ${localhost.replaceAll('.', '\\.')} as ada@example\\.com`),
    );
    const back = await svc(['login'], env);
    assert.equal(back.code, 0, back.stderr);
  });

  test('when a second key is added and used then it signs in, with its passphrase', async () => {
    const add = await svc(['keys', 'add', `${second.path}.pub`, '--title', 'laptop'], env);
    assert.equal(add.code, 0, add.stderr);
    const list = await svc(['keys', 'list', '--json'], env);
    assert.deepEqual(
      JSON.parse(list.stdout)
        .keys.map((key: { title: string }) => key.title)
        .sort(),
      ['id_ed25519', 'laptop'],
    );
    const noPassphrase = await svc(['login', '--key', second.path], env);
    assert.equal(noPassphrase.code, 1);
    assert.match(noPassphrase.stderr, /protected by a passphrase.*--passphrase/s);
    const wrong = await svc(['login', '--key', second.path, '--passphrase', 'wrong'], env);
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /passphrase .* is not right/);
    const login = await svc(['login', '--key', second.path, '--passphrase', 'open sesame'], env);
    assert.equal(login.code, 0, login.stderr);
  });

  test('when the first key is removed then it cannot log in, while the second key session goes on', async () => {
    const remove = await svc(['keys', 'remove', firstKeyId], env);
    assert.equal(remove.code, 0, remove.stderr);
    assert.doesNotMatch(remove.stderr, /last key/, 'another key is left');
    const refused = await svc(['login', '--key', first.path], env);
    assert.equal(refused.code, 4);
    assert.match(
      refused.stderr,
      /did not accept the key SHA256:.*Is it registered\? If not, add .*id_ed25519.pub in the service's web console/,
    );
    assert.ok(refused.stderr.includes(`${service.url}/console/keys`), refused.stderr);
    const whoami = await svc(['whoami'], env);
    assert.equal(whoami.code, 0, whoami.stderr);
  });

  test('when the developer logs out then whoami needs a login (exit 4), the key stays registered, and a copy of the token still works', async () => {
    const token = JSON.parse((await svc(['whoami', '--json'], env)).stdout);
    assert.ok(token.account);
    const stored = JSON.parse(readFileSync(join(home, '.config/svc/sdk.json'), 'utf8'))
      .access_token as string;
    const logout = await svc(['logout'], env);
    assert.equal(logout.code, 0);
    assert.match(logout.stdout, /^Signed out: the local token is removed\.\n$/);
    assert.match(logout.stderr, /A copy of that token made elsewhere works until /);
    assert.match(logout.stderr, /stays registered/);
    // Logout is local only (SPEC): a copy of the token, say a CI job's SVC_TOKEN, goes on working.
    assert.equal((await call(service.url, 'GET', '/api/v1/dev/me', { token: stored })).status, 200);
    const whoami = await svc(['whoami'], env);
    assert.equal(whoami.code, 4);
    assert.match(whoami.stderr, /svc login/);
  });

  test('when SVC_TOKEN is set then it wins over the stored token, both ways', async () => {
    const login = await svc(['login', '--key', second.path, '--passphrase', 'open sesame'], env);
    assert.equal(login.code, 0, login.stderr);
    const bogus = await svc(['whoami'], { ...env, SVC_TOKEN: 'svc_not_a_real_token_at_all_000000' });
    assert.equal(bogus.code, 4, 'a bad SVC_TOKEN is used even though a good token is stored');
    assert.match(bogus.stderr, /SVC_TOKEN is not valid/);

    const session = await call(service.url, 'POST', '/api/v1/account/sessions', {
      body: { email: 'ada@example.com', password: 'correct horse battery staple' },
    });
    await svc(['logout'], env);
    const fromEnv = await svc(['whoami'], { ...env, SVC_TOKEN: String(session.body.access_token) });
    assert.equal(fromEnv.code, 0, fromEnv.stderr);
    assert.match(fromEnv.stdout, /token from the SVC_TOKEN variable/);
  });

  test('when ssh-agent holds the key then login signs through it without reading the private key', async () => {
    const agent = await startAgent(home);
    try {
      const third = makeKey(keys, 'agent_ed25519');
      const session = await call(service.url, 'POST', '/api/v1/account/sessions', {
        body: { email: 'ada@example.com', password: 'correct horse battery staple' },
      });
      await call(service.url, 'POST', '/api/v1/dev/keys', {
        token: session.body.access_token,
        body: { public_key: third.publicLine },
      });
      agent.add(third.path);
      rmSync(third.path); // the private key is gone: only the agent can sign
      const login = await svc(['login', '--key', third.path], { ...env, SSH_AUTH_SOCK: agent.socket });
      assert.equal(login.code, 0, login.stderr);
      assert.match(login.stderr, /via ssh-agent/);
    } finally {
      agent.child.kill();
    }
  });

  test('when login --ci is run then it only reminds about SVC_TOKEN and stores nothing', async () => {
    await svc(['logout'], env);
    const ci = await svc(['login', '--ci'], env);
    assert.equal(ci.code, 0);
    assert.match(ci.stdout, /SVC_TOKEN/);
    assert.equal((await svc(['whoami'], env)).code, 4);
  });
});
