/**
 * Keys at rest: what the database keeps secret (the signing keys' private halves, the cars' broker
 * secrets) is encrypted with the key-encryption key, so a dump of it gives none away; keys a build
 * before this stored in plain text are encrypted on the first start that has the key; the key is
 * rotated by `npm run rotate-key-encryption-key`; a service that lacks the key says so in one line.
 * Needs Postgres (for pg_dump): DATABASE_URL's server, else the one at 127.0.0.1:5432.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verifyWebhook } from '@svc/sdk';
import { createLocalJWKSet, jwtVerify, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { migrateToLatest } from '../src/store/db.ts';
import { keyEncryptionKeyFile, keyEncryptionKeyId } from '../src/store/key-encryption.ts';
import { type Developer, signUpAdmin } from './support/accounts.ts';
import { provisionCar } from './support/cars.ts';
import { call, eventually } from './support/http.ts';
import { testKeyEncryptionKey } from './support/key-encryption.ts';
import { startTestService, type TestService } from './support/service.ts';
import { exitOf, programArgs, startServiceProcess } from './support/service-process.ts';
import { openTestStore, postgresServerUrl, type TestStore } from './support/store.ts';
import { startWebhookReceiver } from './support/webhook-receiver.ts';

const adminEmail = 'keys-admin@example.com';
const newKey = () => randomBytes(32).toString('base64');

/**
 * A program of the service (`main`, `rotate-key-encryption-key`) run to its end, with only the env
 * given: this run's build of it, as `npm run serve` and `npm run rotate-key-encryption-key` run.
 */
async function run(program: string, env: Record<string, string>) {
  const {
    DATABASE_URL: _d,
    SVC_KEY_ENCRYPTION_KEY: _k,
    SVC_PREVIOUS_KEY_ENCRYPTION_KEY: _p,
    ...inherited
  } = process.env;
  const child = spawn(process.execPath, programArgs(program), {
    env: { ...inherited, PORT: '0', METRICS_PORT: '0', MQTT_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  // main.ts that started is stopped once it said so; one that refused has exited.
  const code = await Promise.race([
    exitOf(child),
    new Promise<'running'>((resolve) =>
      child.stdout?.on('data', () => stdout.includes('Stop with') && resolve('running')),
    ),
  ]);
  if (code === 'running') {
    child.kill('SIGTERM');
    await exitOf(child);
  }
  return { code, stdout, stderr };
}

function pgDump(databaseUrl: string): string {
  return execFileSync('pg_dump', ['--no-owner', databaseUrl], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
}

/** What `signing_keys` holds of each key's private half. */
async function privateHalves(store: TestStore) {
  return store
    .db('signing_keys')
    .orderBy('kid')
    .select('kid', 'private_jwk', 'private_jwk_ciphertext', 'key_encryption_key_id', 'encryption_algorithm');
}

/** A JWT the service's current key signs verifies against the JWKS it serves. */
async function signsVerifiably(service: TestService): Promise<string> {
  const signer = await service.app.services.signingKeys.currentSigner();
  const token = await new SignJWT({ sub: 'someone' })
    .setProtectedHeader({ alg: 'ES256', kid: signer.kid })
    .sign(signer.key);
  const jwks = await call(service.url, 'GET', '/.well-known/jwks.json');
  await jwtVerify(token, createLocalJWKSet(jwks.body), { algorithms: ['ES256'] });
  return signer.kid;
}

// The two parts share nothing (a Postgres database; a data folder of its own) and run at once; the
// tests on the database one after the other, as each leaves it to the next.
describe.concurrent('keys at rest', () => {
  let store: TestStore;
  let service: TestService;
  let admin: Developer;
  let carSecret: string;
  let webhookSecret: string;
  let webhookId: string;

  beforeAll(async () => {
    store = await openTestStore({ serverUrl: postgresServerUrl });
    service = await startTestService({ SVC_ADMIN_EMAILS: adminEmail }, { store });
    admin = await signUpAdmin(service, adminEmail);
    carSecret = (await provisionCar(service, admin, 'brand_b:keys-at-rest.1')).mqtt.password;
    const webhook = await call(service.url, 'POST', '/api/v1/webhooks', {
      token: admin.token,
      body: { url: 'https://hooks.example.com/svc', events: ['webhook.ping'] },
    });
    assert.equal(webhook.status, 201, JSON.stringify(webhook.body));
    webhookSecret = webhook.body.secret;
    webhookId = webhook.body.webhook.webhook_id;
  });
  afterAll(async () => {
    await service?.stop();
    await store?.close();
  });

  test.sequential('when the database is dumped then the dump holds no private key member and no car secret', async () => {
    const dump = pgDump(String(store.databaseUrl));
    // The signing keys are in it, public halves in plain sight.
    assert.match(dump, /"crv": "P-256"/);
    assert.equal(dump.includes('"d":'), false, 'a private JWK member "d" is in the dump');
    assert.equal(dump.includes(carSecret), false, "the car's broker secret is in the dump");
    assert.equal(
      dump.includes(webhookSecret.slice('whsec_'.length)),
      false,
      'a webhook secret is in the dump',
    );
    assert.doesNotMatch(dump, /mq_[A-Za-z0-9_-]{32}/);
    for (const row of await privateHalves(store)) {
      assert.equal(row.private_jwk, null);
      assert.equal(
        row.key_encryption_key_id,
        keyEncryptionKeyId(Buffer.from(testKeyEncryptionKey, 'base64')),
      );
      assert.equal(row.encryption_algorithm, 'A256GCM');
    }
  });

  test.sequential('when a database holds signing keys in plain text then the first start with the key encrypts them, and the same key signs on', async () => {
    const old = await openTestStore({ serverUrl: postgresServerUrl });
    try {
      await migrateToLatest(old.db);
      // As a build before keys at rest left them: a current and a next key, private halves plain.
      const kids: string[] = [];
      for (const state of ['current', 'next']) {
        const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
        const kid = `plain-${state}`;
        kids.push(kid);
        await old.db('signing_keys').insert({
          kid,
          state,
          public_jwk: JSON.stringify({
            ...publicKey.export({ format: 'jwk' }),
            kid,
            alg: 'ES256',
            use: 'sig',
          }),
          private_jwk: JSON.stringify(privateKey.export({ format: 'jwk' })),
          created_at: new Date('2026-11-20T10:00:00Z'),
          activated_at: state === 'current' ? new Date('2026-11-20T10:00:00Z') : null,
        });
      }
      assert.ok(pgDump(String(old.databaseUrl)).includes('"d":'));

      const upgraded = await startTestService({}, { store: old });
      try {
        assert.equal(await signsVerifiably(upgraded), 'plain-current');
        const rows = await privateHalves(old);
        assert.deepEqual(
          rows.map((row) => [row.kid, row.private_jwk, typeof row.private_jwk_ciphertext]),
          kids.map((kid) => [kid, null, 'string']),
        );
        assert.equal(pgDump(String(old.databaseUrl)).includes('"d":'), false);
        assert.ok(upgraded.logs.some((line) => line.includes('now encrypted at rest')));
      } finally {
        await upgraded.stop();
      }
    } finally {
      await old.close();
    }
  });

  test.sequential('when the key-encryption key is rotated with the command then every key is re-encrypted under the new one, and a service with only the new key signs with the same key', async () => {
    const rotated = newKey();
    const databaseUrl = String(store.databaseUrl);
    const before = await signsVerifiably(service);
    const rotation = await run('rotate-key-encryption-key', {
      DATABASE_URL: databaseUrl,
      SVC_KEY_ENCRYPTION_KEY: rotated,
      SVC_PREVIOUS_KEY_ENCRYPTION_KEY: testKeyEncryptionKey,
    });
    assert.equal(rotation.code, 0, rotation.stderr);
    const newId = keyEncryptionKeyId(Buffer.from(rotated, 'base64'));
    assert.match(
      rotation.stdout,
      new RegExp(
        `^svc: re-encrypted with key-encryption key ${newId}: 2 signing keys, 1 broker secrets, 1 webhook secrets\\.`,
      ),
    );
    for (const row of await privateHalves(store)) assert.equal(row.key_encryption_key_id, newId);
    const endpoint = await store.db('webhook_endpoints').where({ id: webhookId }).first();
    assert.equal(endpoint.secret_key_id, newId);

    const again = await run('rotate-key-encryption-key', {
      DATABASE_URL: databaseUrl,
      SVC_KEY_ENCRYPTION_KEY: rotated,
    });
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /: 0 signing keys, 0 broker secrets, 0 webhook secrets\./);

    const receiver = await startWebhookReceiver();
    const after = await startTestService(
      { SVC_KEY_ENCRYPTION_KEY: rotated, SVC_WEBHOOK_ALLOW_PRIVATE: 'true' },
      { store },
    );
    try {
      assert.equal(await signsVerifiably(after), before);
      // The endpoint's secret, re-sealed, still signs what the endpoint gets.
      const signIn = await call(after.url, 'POST', '/api/v1/account/sessions', {
        body: { email: admin.email, password: admin.password },
      });
      const token = signIn.body.access_token;
      const moved = await call(after.url, 'PATCH', `/api/v1/webhooks/${webhookId}`, {
        token,
        body: { url: receiver.url },
      });
      assert.equal(moved.status, 200, JSON.stringify(moved.body));
      await call(after.url, 'POST', `/api/v1/webhooks/${webhookId}/pings`, { token });
      await eventually('the ping arrived', () => receiver.delivered().length === 1);
      const [ping] = receiver.received;
      const event = await verifyWebhook(
        String(ping?.body),
        ping?.headers as Record<string, string>,
        webhookSecret,
        {
          now: after.clock.now,
        },
      );
      assert.equal(event.type, 'webhook.ping');
    } finally {
      await after.stop();
      await receiver.close();
    }

    // The service started with the old key alone is refused, in one line naming both keys.
    const stale = await run('main', {
      DATABASE_URL: databaseUrl,
      SVC_KEY_ENCRYPTION_KEY: testKeyEncryptionKey,
    });
    assert.equal(stale.code, 2, stale.stderr);
    const oldId = keyEncryptionKeyId(Buffer.from(testKeyEncryptionKey, 'base64'));
    // Its log lines (the migrations it found done) come first; the refusal is one line of its own.
    const refusal = stale.stderr.replace(/^\{.*\}\n/gm, '');
    assert.match(
      refusal,
      new RegExp(
        `^svc: signing key \\S+ is encrypted with key-encryption key ${newId}, and SVC_KEY_ENCRYPTION_KEY is key ${oldId}: set SVC_KEY_ENCRYPTION_KEY to the key the database was encrypted with .*\\n$`,
      ),
    );
  });

  test.sequential('when DATABASE_URL is set without a key-encryption key, or with a wrong one, then one line says what to set, exit 2', async () => {
    const databaseUrl = String(store.databaseUrl);
    const cases = [
      [{}, /^svc: SVC_KEY_ENCRYPTION_KEY must be set with DATABASE_URL: .*openssl rand -base64 32.*\n$/],
      [
        { SVC_KEY_ENCRYPTION_KEY: 'c2hvcnQ=' },
        /^svc: SVC_KEY_ENCRYPTION_KEY must be 32 random bytes in base64, made with openssl rand -base64 32 \(the value given is 5 bytes\)\n$/,
      ],
    ] as const;
    // Both are refused before the store is opened: they run at once.
    const refusals = await Promise.all(
      cases.map(async ([env, expected]) => ({
        expected,
        ...(await run('main', { DATABASE_URL: databaseUrl, ...env })),
      })),
    );
    for (const refused of refusals) {
      assert.equal(refused.code, 2, refused.stderr);
      assert.match(refused.stderr, refused.expected);
    }
  });
});

describe.concurrent('keys at rest, embedded', () => {
  test('when the embedded service first starts then it makes DATA_DIR/key-encryption-key, mode 0600, and refuses to start once others may read it', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'svc-kek-'));
    try {
      const first = await startServiceProcess({ dataDir });
      await first.stop();
      const file = keyEncryptionKeyFile(dataDir);
      assert.equal(statSync(file).mode & 0o777, 0o600);

      chmodSync(file, 0o644);
      const refused = await run('main', { DATA_DIR: dataDir });
      assert.equal(refused.code, 2, refused.stderr);
      assert.equal(
        refused.stderr,
        `svc: ${file} may be read by other users: make it the service user's alone (chmod 600 ${file})\n`,
      );
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
