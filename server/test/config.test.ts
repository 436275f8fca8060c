import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, test } from 'vitest';
import { renderConfigurationPage } from '../../scripts/generate-config-docs.ts';
import { ConfigError, loadConfig, readConfig, settings } from '../src/config.ts';

/** A start-up refusal whose message matches. */
const refusal = (message: RegExp) => (error: unknown) =>
  error instanceof ConfigError && message.test(error.message);

describe('config', () => {
  test('when nothing is set then the embedded defaults apply', () => {
    const config = loadConfig({});
    assert.equal(config.host, '127.0.0.1');
    assert.equal(config.port, 8080);
    assert.equal(config.dataDir, resolve('.svc-data'));
    assert.equal(config.databaseUrl, undefined);
    assert.equal(config.publicUrl, undefined);
    assert.equal(config.signup, 'open');
    assert.equal(config.tokenTtlSeconds, 3600);
    assert.equal(config.adminEmails.size, 0);
    assert.equal(config.requestTimeoutSeconds, 30);
    assert.equal(config.minBodyBytesPerSecond, 1024);
    assert.equal(config.uploadLeaseSeconds, 30);
    assert.equal(config.shutdownGraceSeconds, 5);
    assert.equal(config.commandSweepSeconds, 5);
    assert.equal(config.signingKeyRotationSeconds, 30 * 86400);
    assert.equal(config.databaseAcquireTimeoutMs, 5000);
    assert.equal(config.databaseStatementTimeoutMs, 10000);
    assert.equal(config.mqttMaxQueuedMessages, 1000);
    assert.equal(config.mqttMaxQueuedBytes, 1024 * 1024);
    assert.equal(config.replicaId, 'main');
    assert.equal(config.packageBucket, undefined);
    assert.equal(config.logLevel, 'info');
    assert.equal(config.mqttTls, undefined);
    assert.equal(config.mqttCa, undefined);
  });

  test('when S3_BUCKET is set then packages go to that bucket, with the region and addressing given or their defaults', () => {
    assert.deepEqual(loadConfig({ S3_BUCKET: 'svc-packages' }).packageBucket, {
      bucket: 'svc-packages',
      endpoint: undefined,
      region: 'us-east-1',
      forcePathStyle: false,
    });
    const minio = loadConfig({
      S3_BUCKET: 'svc-packages',
      S3_ENDPOINT: 'http://127.0.0.1:9000/',
      S3_REGION: 'eu-central-1',
      S3_FORCE_PATH_STYLE: 'TRUE',
    });
    assert.deepEqual(minio.packageBucket, {
      bucket: 'svc-packages',
      endpoint: 'http://127.0.0.1:9000',
      region: 'eu-central-1',
      forcePathStyle: true,
    });
  });

  test('when MQTT_CA names a file without a PEM block then the setting is refused, naming it', () => {
    assert.throws(
      () => loadConfig({ MQTT_CA: new URL(import.meta.url).pathname }),
      (error: unknown) =>
        error instanceof ConfigError && /^MQTT_CA names .*, which holds no PEM block/.test(error.message),
    );
  });

  test("when the embedded broker's queue bounds are set then they are read as a count and bytes", () => {
    const config = loadConfig({ MQTT_MAX_QUEUED_MESSAGES: '50', MQTT_MAX_QUEUED_BYTES: ' 65536 ' });
    assert.equal(config.mqttMaxQueuedMessages, 50);
    assert.equal(config.mqttMaxQueuedBytes, 65536);
  });

  test('when the database timeouts are set then they are read as durations', () => {
    const config = loadConfig({
      DATABASE_ACQUIRE_TIMEOUT: '250ms',
      DATABASE_STATEMENT_TIMEOUT: ' 30s ',
    });
    assert.equal(config.databaseAcquireTimeoutMs, 250);
    assert.equal(config.databaseStatementTimeoutMs, 30000);
  });

  test('when a duration is written with any unit then every duration setting reads it', () => {
    const config = loadConfig({
      DATABASE_ACQUIRE_TIMEOUT: '1500ms',
      DATABASE_STATEMENT_TIMEOUT: '2m',
      SVC_SHUTDOWN_GRACE: '3000ms',
      SVC_UPLOAD_URL_TTL: '2h',
      SVC_TOKEN_TTL: '1d',
    });
    assert.equal(config.databaseAcquireTimeoutMs, 1500);
    assert.equal(config.databaseStatementTimeoutMs, 120_000);
    assert.equal(config.shutdownGraceSeconds, 3);
    assert.equal(config.uploadUrlTtlSeconds, 7200);
    assert.equal(config.tokenTtlSeconds, 86400);
  });

  test('when a duration in seconds is a bare number then it is read as seconds, with a warning to write the unit', () => {
    const { config, warnings } = readConfig({ SVC_SHUTDOWN_GRACE: '20' });
    assert.equal(config.shutdownGraceSeconds, 20);
    assert.deepEqual(warnings, [
      'SVC_SHUTDOWN_GRACE=20 is read as 20s: write SVC_SHUTDOWN_GRACE=20s, a duration without its unit is refused from svc 0.3.0',
    ]);
    assert.deepEqual(readConfig({ SVC_SHUTDOWN_GRACE: '20s' }).warnings, []);
  });

  test('when a setting is set under its former name then it is read, with a warning naming the new one', () => {
    const { config, warnings } = readConfig({ DATABASE_ACQUIRE_TIMEOUT_MS: '250' });
    assert.equal(config.databaseAcquireTimeoutMs, 250);
    assert.deepEqual(warnings, [
      'DATABASE_ACQUIRE_TIMEOUT_MS is now DATABASE_ACQUIRE_TIMEOUT: set DATABASE_ACQUIRE_TIMEOUT=250ms instead (DATABASE_ACQUIRE_TIMEOUT_MS is refused from svc 0.3.0)',
    ]);
    assert.equal(
      readConfig({ DATABASE_STATEMENT_TIMEOUT_MS: '30000' }).config.databaseStatementTimeoutMs,
      30000,
    );
  });

  test('when the release that retires them runs then a former name and a bare number are refused', () => {
    const later = { release: '0.3.0' };
    assert.throws(
      () => readConfig({ DATABASE_ACQUIRE_TIMEOUT_MS: '250' }, later),
      refusal(
        /^DATABASE_ACQUIRE_TIMEOUT_MS is now DATABASE_ACQUIRE_TIMEOUT: set DATABASE_ACQUIRE_TIMEOUT=250ms instead$/,
      ),
    );
    assert.throws(
      () => readConfig({ SVC_TOKEN_TTL: '3600' }, later),
      refusal(/^SVC_TOKEN_TTL must be a duration: a whole number and its unit/),
    );
  });

  test('when a setting is set under both its former and its new name then start-up fails naming both', () => {
    assert.throws(
      () => loadConfig({ DATABASE_STATEMENT_TIMEOUT_MS: '5000', DATABASE_STATEMENT_TIMEOUT: '5s' }),
      refusal(
        /^DATABASE_STATEMENT_TIMEOUT_MS and DATABASE_STATEMENT_TIMEOUT are both set: DATABASE_STATEMENT_TIMEOUT_MS is DATABASE_STATEMENT_TIMEOUT's former name; unset DATABASE_STATEMENT_TIMEOUT_MS$/,
      ),
    );
  });

  test('when docs/configuration.md is read then it is what the settings make (`npm run generate`)', () => {
    const committed = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
    assert.equal(committed, renderConfigurationPage());
    for (const setting of Object.values(settings))
      assert.match(committed, new RegExp(`\\| \`${setting.env}\` \\|`));
  });

  test('when variables are set then they are read and normalised', () => {
    const config = loadConfig({
      HOST: '0.0.0.0',
      PORT: '9000',
      DATA_DIR: '/var/lib/svc',
      DATABASE_URL: 'postgres://127.0.0.1:5432/svc',
      SVC_KEY_ENCRYPTION_KEY: Buffer.alloc(32, 1).toString('base64'),
      SVC_PUBLIC_URL: 'https://svc.example.com/',
      SVC_SIGNUP: 'closed',
      SVC_ADMIN_EMAILS: ' Root@Example.com, ops@example.com ,',
      SVC_TOKEN_TTL: '15m',
      SVC_REQUEST_TIMEOUT: '10s',
      SVC_MIN_BODY_RATE: '512',
      SVC_UPLOAD_LEASE: '1m',
      SVC_SHUTDOWN_GRACE: '20',
      SVC_COMMAND_SWEEP: '30s',
      SVC_SIGNING_KEY_ROTATION: '7d',
      SVC_REPLICA_ID: ' svc-1 ',
    });
    assert.equal(config.port, 9000);
    assert.equal(config.dataDir, '/var/lib/svc');
    assert.equal(config.publicUrl, 'https://svc.example.com');
    assert.equal(config.signup, 'closed');
    assert.deepEqual([...config.adminEmails], ['root@example.com', 'ops@example.com']);
    assert.equal(config.tokenTtlSeconds, 900);
    assert.equal(config.requestTimeoutSeconds, 10);
    assert.equal(config.minBodyBytesPerSecond, 512);
    assert.equal(config.uploadLeaseSeconds, 60);
    assert.equal(config.shutdownGraceSeconds, 20);
    assert.equal(config.commandSweepSeconds, 30);
    assert.equal(config.signingKeyRotationSeconds, 7 * 86400);
    assert.equal(config.replicaId, 'svc-1');
    assert.deepEqual(config.keyEncryptionKey, Buffer.alloc(32, 1));
  });

  test('when SVC_CORS_ORIGINS is unset then no origin is listed; when set then each is kept as browsers write it', () => {
    assert.deepEqual([...loadConfig({}).corsOrigins], []);
    const config = loadConfig({
      SVC_CORS_ORIGINS: ' https://App.Example.com:443/ , http://localhost:5173,,http://127.0.0.1:8081',
    });
    assert.deepEqual(
      [...config.corsOrigins],
      ['https://app.example.com', 'http://localhost:5173', 'http://127.0.0.1:8081'],
    );
  });

  const bad: [Record<string, string>, RegExp][] = [
    [{ PORT: 'eighty' }, /^PORT /],
    [{ PORT: '70000' }, /^PORT /],
    [{ METRICS_PORT: 'x' }, /^METRICS_PORT /],
    [{ PORT: '9000', METRICS_PORT: '9000' }, /^METRICS_PORT must differ from PORT/],
    [{ SVC_SIGNUP: 'maybe' }, /^SVC_SIGNUP must be one of open, closed/],
    [{ SVC_TOKEN_TTL: '-1' }, /^SVC_TOKEN_TTL /],
    [{ SVC_TOKEN_TTL: '1 week' }, /^SVC_TOKEN_TTL /],
    [{ SVC_PUBLIC_URL: 'svc.example.com' }, /^SVC_PUBLIC_URL /],
    [{ SVC_PUBLIC_URL: 'ftp://svc.example.com' }, /^SVC_PUBLIC_URL /],
    [{ DATABASE_URL: 'mysql://localhost/svc' }, /^DATABASE_URL /],
    [{ DATABASE_URL: 'postgres://127.0.0.1/svc' }, /^SVC_KEY_ENCRYPTION_KEY must be set with DATABASE_URL/],
    [
      { SVC_KEY_ENCRYPTION_KEY: 'c2VjcmV0' },
      /^SVC_KEY_ENCRYPTION_KEY must be 32 random bytes .*is 6 bytes\)$/,
    ],
    [
      { SVC_PREVIOUS_KEY_ENCRYPTION_KEY: 'not base64!' },
      /^SVC_PREVIOUS_KEY_ENCRYPTION_KEY .*is not base64\)$/,
    ],
    [{ SVC_ADMIN_EMAILS: 'notanemail' }, /^SVC_ADMIN_EMAILS must be emails .*"notanemail" is not an email/],
    [{ SVC_ADMIN_EMAILS: 'root@example.com;ops@example.com' }, /^SVC_ADMIN_EMAILS /],
    [{ SVC_REQUEST_TIMEOUT: '0' }, /^SVC_REQUEST_TIMEOUT /],
    [{ SVC_MIN_BODY_RATE: 'fast' }, /^SVC_MIN_BODY_RATE must be a positive number of bytes, such as 1024/],
    [{ SVC_UPLOAD_LEASE: '-5s' }, /^SVC_UPLOAD_LEASE /],
    [{ SVC_SHUTDOWN_GRACE: 'soon' }, /^SVC_SHUTDOWN_GRACE /],
    [{ SVC_COMMAND_SWEEP: 'often' }, /^SVC_COMMAND_SWEEP /],
    [{ SVC_COMMAND_SWEEP: '30d' }, /^SVC_COMMAND_SWEEP must be at most 1h/],
    [{ SVC_REPLICA_ID: 'svc/1' }, /^SVC_REPLICA_ID must be 1 to 64 letters/],
    [{ SVC_REPLICA_ID: 'x'.repeat(65) }, /^SVC_REPLICA_ID /],
    [{ SVC_SIGNING_KEY_ROTATION: 'monthly' }, /^SVC_SIGNING_KEY_ROTATION /],
    [{ SVC_SIGNING_KEY_ROTATION: '10m' }, /^SVC_SIGNING_KEY_ROTATION must be at least 1h/],
    [{ DATABASE_ACQUIRE_TIMEOUT: '0' }, /^DATABASE_ACQUIRE_TIMEOUT must be at least 1ms, not "0"$/],
    [
      { DATABASE_ACQUIRE_TIMEOUT: '5000' },
      /^DATABASE_ACQUIRE_TIMEOUT must be a duration: a whole number and its unit \(ms, s, m, h or d\), such as 500ms, 5s, 15m or 1h, not "5000"$/,
    ],
    [{ DATABASE_ACQUIRE_TIMEOUT: '1.5s' }, /^DATABASE_ACQUIRE_TIMEOUT must be a duration: .*not "1\.5s"$/],
    [{ DATABASE_ACQUIRE_TIMEOUT: '5 s' }, /^DATABASE_ACQUIRE_TIMEOUT must be a duration: /],
    [{ DATABASE_ACQUIRE_TIMEOUT: '5S' }, /^DATABASE_ACQUIRE_TIMEOUT must be a duration: /],
    [{ DATABASE_ACQUIRE_TIMEOUT: '1w' }, /^DATABASE_ACQUIRE_TIMEOUT must be a duration: /],
    [{ DATABASE_STATEMENT_TIMEOUT: '-1s' }, /^DATABASE_STATEMENT_TIMEOUT must be a duration: /],
    [{ DATABASE_STATEMENT_TIMEOUT: '25d' }, /^DATABASE_STATEMENT_TIMEOUT must be at most 24d, not "25d"$/],
    [{ DATABASE_ACQUIRE_TIMEOUT_MS: '0' }, /^DATABASE_ACQUIRE_TIMEOUT_MS must be at least 1ms/],
    [{ DATABASE_ACQUIRE_TIMEOUT_MS: '1.5' }, /^DATABASE_ACQUIRE_TIMEOUT_MS must be a duration: /],
    [{ SVC_SHUTDOWN_GRACE: '500ms' }, /^SVC_SHUTDOWN_GRACE must be at least 1s, not "500ms"$/],
    [
      { SVC_TOKEN_TTL: '1500ms' },
      /^SVC_TOKEN_TTL must be a whole number of seconds, such as 2s, not "1500ms"$/,
    ],
    [{ MQTT_MAX_QUEUED_MESSAGES: '0' }, /^MQTT_MAX_QUEUED_MESSAGES must be a whole number greater than 0/],
    [{ MQTT_MAX_QUEUED_MESSAGES: '1e3' }, /^MQTT_MAX_QUEUED_MESSAGES /],
    [{ MQTT_MAX_QUEUED_BYTES: '1MiB' }, /^MQTT_MAX_QUEUED_BYTES must be a positive number of bytes/],
    [
      { SVC_CORS_ORIGINS: '*' },
      /^SVC_CORS_ORIGINS must be web origins separated by commas.*; "\*" is not one$/,
    ],
    [{ SVC_CORS_ORIGINS: 'app.example.com' }, /^SVC_CORS_ORIGINS .*"app\.example\.com" is not one$/],
    [{ SVC_CORS_ORIGINS: 'https://app.example.com/app' }, /^SVC_CORS_ORIGINS .*\/app" is not one$/],
    [{ SVC_CORS_ORIGINS: 'https://user@app.example.com' }, /^SVC_CORS_ORIGINS /],
    [{ SVC_CORS_ORIGINS: 'https://app.example.com?x=1' }, /^SVC_CORS_ORIGINS /],
    [
      { SVC_CORS_ORIGINS: 'https://app.exa\nmple.com' },
      /^SVC_CORS_ORIGINS .*"https:\/\/app\.exa\\nmple\.com" is not one$/,
    ],
    [{ SVC_CORS_ORIGINS: 'https://a.example.com;https://b.example.com' }, /^SVC_CORS_ORIGINS /],
    [{ S3_BUCKET: 'Svc_Packages' }, /^S3_BUCKET must be a bucket name/],
    [
      { S3_BUCKET: 'svc', S3_ENDPOINT: '127.0.0.1:9000' },
      /^S3_ENDPOINT must be the http:\/\/ or https:\/\/ URL/,
    ],
    [{ S3_BUCKET: 'svc', S3_ENDPOINT: 'ftp://files.example.com' }, /^S3_ENDPOINT must be the http/],
    [
      { S3_BUCKET: 'svc', S3_ENDPOINT: 'http://key:secret@127.0.0.1:9000' },
      /^S3_ENDPOINT must hold no user name/,
    ],
    [
      { S3_BUCKET: 'svc', S3_FORCE_PATH_STYLE: 'yes' },
      /^S3_FORCE_PATH_STYLE must be true or false, not "yes"/,
    ],
    [{ S3_ENDPOINT: 'http://127.0.0.1:9000' }, /^S3_ENDPOINT is set but S3_BUCKET is not/],
    [{ S3_FORCE_PATH_STYLE: 'yes' }, /^S3_FORCE_PATH_STYLE is set but S3_BUCKET is not: set S3_BUCKET/],
    [
      { MQTT_URL: 'mqtt://127.0.0.1:1883', MQTT_USERNAME: 'svc' },
      /^MQTT_URL needs MQTT_USERNAME and MQTT_PASSWORD/,
    ],
    [{ MQTT_URL: 'mqtt://svc:secret@127.0.0.1:1883' }, /^MQTT_URL must not hold a user name or password/],
  ];
  for (const [env, message] of bad) {
    test(`when ${JSON.stringify(env)} then start-up fails naming the variable`, () => {
      assert.throws(() => loadConfig(env), refusal(message));
    });
  }
});
