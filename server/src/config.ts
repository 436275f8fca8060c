/**
 * The service's settings, one table: each has its environment variable, default, parser and one
 * line of documentation, from which both the `Config` type and docs/configuration.md
 * (`npm run generate`) are made. A bad value stops start-up with a message naming the variable.
 */
import { createSecureContext } from 'node:tls';
import contract from '../../generated/openapi.json' with { type: 'json' };
import {
  brokerUrl,
  bucketName,
  byteCount,
  ConfigError,
  count,
  directory,
  duration,
  emailList,
  encryptionKey,
  formerFormsRefusedFrom,
  httpUrl,
  oneOf,
  originList,
  type Parse,
  pemFile,
  port,
  postgresUrl,
  type Reading,
  redisUrl,
  replicaName,
  s3Endpoint,
  text,
  trueOrFalse,
} from './config-values.ts';
import { compareReleases, release as currentRelease } from './release.ts';

export { ConfigError };

export type SignupMode = 'open' | 'closed';

/** pino's levels, quietest last. */
export const logLevels = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof logLevels)[number];

export interface Setting<T> {
  env: string;
  /** The value an unset or empty variable takes, as it would be written; none: unset means unset. */
  default?: string;
  /** The docs' default column, when `default` does not say it (a value worked out at start). */
  shownDefault?: string;
  parse: Parse<T>;
  /** One line for docs/configuration.md: what the setting changes, for an operator. */
  doc: string;
  /** Read only when this other variable is set; without it the setting is unset. */
  onlyWith?: string;
  /** Set without `onlyWith`'s variable: a mistake to stop at, saying what to do (else ignored). */
  strayAdvice?: (name: string) => string;
  /** The name the setting had, still read (a bare number in `unit`) with a warning for one release. */
  formerly?: { name: string; unit: 'ms' | 's' };
  /** Spaces at the ends are part of the value (a password). */
  keepSpaces?: boolean;
}

/** Set without S3_BUCKET, packages would quietly go to DATA_DIR instead. */
const withoutBucket = (name: string) =>
  `set S3_BUCKET to keep packages in that bucket, or unset ${name} to keep them in DATA_DIR`;

/** The contract's default, which the SDK and console show too. */
const largestPackage = contract.components.schemas.PackageLimits.properties.max_package_bytes.default;

// Node's timers and Postgres's timeouts both hold at most a signed 32-bit count of milliseconds.
const longestTimeout = '24d';

export const settings = {
  host: { env: 'HOST', default: '127.0.0.1', parse: text, doc: 'address to listen on' },
  port: { env: 'PORT', default: '8080', parse: port, doc: 'port to listen on (`0`: any free port)' },
  metricsHost: {
    env: 'METRICS_HOST',
    default: '127.0.0.1',
    parse: text,
    doc: 'address of the Prometheus metrics listener (`GET /metrics`); never the public port',
  },
  metricsPort: {
    env: 'METRICS_PORT',
    default: '9464',
    parse: port,
    doc: 'its port (`0`: any free port); must differ from `PORT`',
  },
  mqttPort: {
    env: 'MQTT_PORT',
    default: '1883',
    parse: port,
    doc: "the embedded broker's port, on `HOST` (`0`: any free port); unused with `MQTT_URL`",
  },
  mqttTlsCert: {
    env: 'MQTT_TLS_CERT',
    parse: pemFile,
    doc: "PEM file of a certificate (chain): the embedded broker also listens with TLS on `MQTT_TLS_PORT`, with the same sign-in and ACL. With `MQTT_TLS_KEY`, both or neither; a file that cannot be read, or a key that is not the certificate's, stops start-up naming the variable ([operating.md](operating.md#mqtt-over-tls))",
  },
  mqttTlsKey: {
    env: 'MQTT_TLS_KEY',
    parse: pemFile,
    doc: "PEM file of `MQTT_TLS_CERT`'s private key",
  },
  mqttTlsPort: {
    env: 'MQTT_TLS_PORT',
    default: '8883',
    parse: port,
    onlyWith: 'MQTT_TLS_CERT',
    doc: "the embedded broker's TLS port, on `HOST` (`0`: any free port)",
  },
  mqttMaxQueuedMessages: {
    env: 'MQTT_MAX_QUEUED_MESSAGES',
    default: '1000',
    parse: count('1000'),
    doc: 'the embedded broker: QoS 1 messages it queues for one car or connector that keeps its session (`clean: false`) while it is away or behind; past it new ones are not queued, as Mosquitto\'s `max_queued_messages` ([integrators.md](integrators.md), "Sessions kept by the embedded broker"); unused with `MQTT_URL`',
  },
  mqttMaxQueuedBytes: {
    env: 'MQTT_MAX_QUEUED_BYTES',
    default: String(1024 * 1024),
    shownDefault: '`1048576` (1 MiB)',
    parse: byteCount('1048576'),
    doc: "the same queue's bound in bytes of topic and payload; unused with `MQTT_URL`",
  },
  mqttUrl: {
    env: 'MQTT_URL',
    parse: brokerUrl,
    doc: "`mqtt://host:port` (or `mqtts://`) of a Mosquitto 2 with dynamic security: the service starts no broker and manages that one's clients and roles ([operating.md](operating.md#the-broker))",
  },
  mqttUsername: {
    env: 'MQTT_USERNAME',
    parse: text,
    onlyWith: 'MQTT_URL',
    doc: "the service's account on that broker (required), allowed to use `$CONTROL/dynamic-security/#` and the car topics",
  },
  mqttPassword: {
    env: 'MQTT_PASSWORD',
    parse: text,
    onlyWith: 'MQTT_URL',
    keepSpaces: true,
    doc: "that account's password (required)",
  },
  mqttCa: {
    env: 'MQTT_CA',
    parse: pemFile,
    shownDefault: "unset (the system's CAs)",
    doc: "with `mqtts://` in `MQTT_URL`: the PEM file of the CA(s) that signed the broker's certificate, which the bridge and the dynamic-security client then require",
  },
  logLevel: {
    env: 'LOG_LEVEL',
    default: 'info',
    parse: oneOf(logLevels),
    doc: `the least severe log lines written: ${logLevels.map((level) => `\`${level}\``).join(', ')}. Health probes (\`/healthz\`, \`/readyz\`) are logged at \`debug\``,
  },
  replicaId: {
    env: 'SVC_REPLICA_ID',
    default: 'main',
    parse: replicaName,
    doc: "this replica's name, kept across its restarts and different for each replica (1–64 of `A-Za-z0-9._-`): its bridge signs in as `<MQTT_USERNAME>/bridge-<SVC_REPLICA_ID>` and takes its broker session back after a restart ([operating.md](operating.md#replicas-and-broker-restarts))",
  },
  publicUrl: {
    env: 'SVC_PUBLIC_URL',
    parse: httpUrl,
    shownDefault: '`http://HOST:PORT`',
    doc: 'the base URL clients use; every sign-in challenge is bound to it and identity tokens name it as `iss`, so set it behind a proxy or with `HOST=0.0.0.0`',
  },
  dataDir: {
    env: 'DATA_DIR',
    default: './.svc-data',
    parse: directory,
    doc: 'where embedded data lives (`db/` holds PGlite, `blobs/` the packages without `S3_BUCKET`)',
  },
  databaseUrl: {
    env: 'DATABASE_URL',
    parse: postgresUrl,
    doc: '`postgres://…`: use that Postgres instead of PGlite',
  },
  s3Bucket: {
    env: 'S3_BUCKET',
    parse: bucketName,
    doc: 'keep every package in that S3-compatible bucket instead of `$DATA_DIR/blobs`, so that replicas share them ([operating.md](operating.md#packages-in-a-bucket)); credentials come from the standard AWS chain (`AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`, or `AWS_PROFILE`, …). The start stops (exit 2, one line) when the bucket is not there or cannot be reached',
  },
  s3Endpoint: {
    env: 'S3_ENDPOINT',
    parse: s3Endpoint,
    onlyWith: 'S3_BUCKET',
    strayAdvice: withoutBucket,
    shownDefault: 'unset (AWS)',
    doc: 'the `http(s)://` URL of any S3-compatible server but AWS itself (MinIO, R2, …)',
  },
  s3Region: {
    env: 'S3_REGION',
    default: 'us-east-1',
    parse: text,
    onlyWith: 'S3_BUCKET',
    strayAdvice: withoutBucket,
    doc: "the bucket's region",
  },
  s3ForcePathStyle: {
    env: 'S3_FORCE_PATH_STYLE',
    default: 'false',
    parse: trueOrFalse,
    onlyWith: 'S3_BUCKET',
    strayAdvice: withoutBucket,
    doc: '`true` to address the bucket as `host/bucket/key`, as MinIO-style servers want',
  },
  keyEncryptionKey: {
    env: 'SVC_KEY_ENCRYPTION_KEY',
    parse: encryptionKey,
    shownDefault:
      'embedded: made in `DATA_DIR/key-encryption-key` (mode 0600); with `DATABASE_URL`: required',
    doc: "32 random bytes in base64 (`openssl rand -base64 32`) that encrypt, with AES-256-GCM, the secrets the database keeps (signing keys' private halves, broker secrets, webhook signing secrets); keep it apart from the database's backups ([operating.md](operating.md#keys-at-rest))",
  },
  previousKeyEncryptionKey: {
    env: 'SVC_PREVIOUS_KEY_ENCRYPTION_KEY',
    parse: encryptionKey,
    doc: 'during a rotation of the key-encryption key: the old key, still read, never written with; `npm run rotate-key-encryption-key` re-encrypts everything under the new one',
  },
  databaseAcquireTimeoutMs: {
    env: 'DATABASE_ACQUIRE_TIMEOUT',
    default: '5s',
    parse: duration({ in: 'ms', atMost: longestTimeout }),
    formerly: { name: 'DATABASE_ACQUIRE_TIMEOUT_MS', unit: 'ms' },
    doc: 'how long a request waits for a database connection (a new Postgres connection included) before it is answered `503` with `Retry-After`',
  },
  databaseStatementTimeoutMs: {
    env: 'DATABASE_STATEMENT_TIMEOUT',
    default: '10s',
    parse: duration({ in: 'ms', atMost: longestTimeout }),
    formerly: { name: 'DATABASE_STATEMENT_TIMEOUT_MS', unit: 'ms' },
    doc: "Postgres `statement_timeout` of the requests' connections, lock waits included; a statement cut off is answered `503`. PGlite cannot interrupt a statement. Start-up migrations are not bound by it",
  },
  signup: {
    env: 'SVC_SIGNUP',
    default: 'open',
    parse: oneOf<SignupMode>(['open', 'closed']),
    doc: '`closed` refuses new accounts (403)',
  },
  adminEmails: {
    env: 'SVC_ADMIN_EMAILS',
    default: '',
    parse: emailList,
    doc: 'comma-separated emails that may be admins, each once it claims the code printed at start ([getting-started.md](getting-started.md#admins))',
  },
  tokenTtlSeconds: {
    env: 'SVC_TOKEN_TTL',
    default: '1h',
    parse: duration({ in: 's' }),
    doc: 'access-token lifetime',
  },
  maxPackageBytes: {
    env: 'SVC_MAX_PACKAGE_BYTES',
    default: String(largestPackage),
    shownDefault: `\`${largestPackage}\` (${largestPackage / 2 ** 20} MiB)`,
    parse: byteCount('52428800'),
    doc: 'the largest mini-app package, in bytes',
  },
  uploadUrlTtlSeconds: {
    env: 'SVC_UPLOAD_URL_TTL',
    default: '15m',
    parse: duration({ in: 's' }),
    doc: 'how long a presigned upload URL works; its PUT may take as long to arrive',
  },
  requestTimeoutSeconds: {
    env: 'SVC_REQUEST_TIMEOUT',
    default: '30s',
    parse: duration({ in: 's' }),
    doc: 'how long any other request (headers and body) may take to arrive; slower ones get 408 and their connection closed',
  },
  minBodyBytesPerSecond: {
    env: 'SVC_MIN_BODY_RATE',
    default: '1024',
    parse: byteCount('1024'),
    doc: 'bytes per second every request body, uploads too, must bring over each `SVC_REQUEST_TIMEOUT`; a slower one gets 408',
  },
  uploadLeaseSeconds: {
    env: 'SVC_UPLOAD_LEASE',
    default: '30s',
    parse: duration({ in: 's' }),
    doc: 'how long an upload in progress holds its URL without news from its receiver (renewed while bytes flow); after a crash or kill the URL works again within this time, and the partial file is deleted',
  },
  shutdownGraceSeconds: {
    env: 'SVC_SHUTDOWN_GRACE',
    default: '5s',
    parse: duration({ in: 's' }),
    doc: 'on Ctrl-C or `SIGTERM`, how long requests in flight may take before they are cut',
  },
  commandSweepSeconds: {
    env: 'SVC_COMMAND_SWEEP',
    default: '5s',
    // Bounded, so that expiry stays timely and the sweep's timer fits Node's.
    parse: duration({ in: 's', atMost: '1h', why: 'commands expire only when it runs' }),
    doc: 'how often commands not final by their expiry become `expired` (and queued commands a replica missed are published); at most `1h`',
  },
  appUpdateRate: {
    env: 'SVC_APP_UPDATE_RATE',
    default: '1000',
    parse: count('1000'),
    doc: 'how many `app.install` commands a second a replica makes at most when it moves cars to a new version of an app (a publication, a rollout move, cars coming online), so that a release to a fleet never floods the broker ([operating.md](operating.md#app-updates-and-rollouts))',
  },
  webhookAllowPrivate: {
    env: 'SVC_WEBHOOK_ALLOW_PRIVATE',
    default: 'false',
    parse: trueOrFalse,
    doc: '`true` to let webhook endpoints be on loopback, private, link-local and metadata addresses, and on `http://` (tests, private networks); otherwise such an address is refused when an endpoint is registered and again, on the resolved address, at every connection ([webhooks.md](webhooks.md))',
  },
  webhookTimeoutMs: {
    env: 'SVC_WEBHOOK_TIMEOUT',
    default: '10s',
    parse: duration({
      in: 'ms',
      atMost: '1m',
      why: 'an endpoint delivers in order, so a slow one waits for itself',
    }),
    doc: 'how long one webhook delivery attempt may take, from connecting to the end of the answer (read up to 64 KiB); past it the attempt failed and is tried again later; at most `1m`',
  },
  webhookDisableAfterSeconds: {
    env: 'SVC_WEBHOOK_DISABLE_AFTER',
    default: '3d',
    parse: duration({
      in: 's',
      atLeast: '1h',
      why: 'a receiver down for a deploy must not lose its endpoint',
    }),
    doc: 'a webhook endpoint whose every attempt has failed for this long is disabled (its owner sees it in the console, and enables it again there or with `PATCH /api/v1/webhooks/{webhook_id}`); at least `1h`',
  },
  signingKeyRotationSeconds: {
    env: 'SVC_SIGNING_KEY_ROTATION',
    default: '30d',
    // The next key must be published well before it signs (verifiers cache the JWKS for
    // minutes), and a key that signs for less than a token's lifetime buys nothing.
    parse: duration({ in: 's', atLeast: '1h', why: 'a new key is published that long before it signs' }),
    doc: 'how long an identity-token signing key signs before the schedule retires it (its successor was published as long); at least `1h` ([mini-apps.md](mini-apps.md#identity-tokens))',
  },
  redisUrl: {
    env: 'REDIS_URL',
    parse: redisUrl,
    doc: '`redis://…`: keep the key-value store (broker credentials, `mqtt:auth:<username>`) in that Redis instead of a table of the SQL store',
  },
  trustProxy: {
    env: 'SVC_TRUST_PROXY',
    parse: text,
    doc: "behind a load balancer: which proxies' `X-Forwarded-For` to believe (Express `trust proxy`: `loopback`, `1`, an address), so sign-in limits count real client addresses; unset: the socket's address is the client's",
  },
  corsOrigins: {
    env: 'SVC_CORS_ORIGINS',
    default: '',
    parse: originList,
    doc: "comma-separated web origins (`https://app.example.com,http://localhost:5173`) whose pages may call the API from a browser: their preflights (`OPTIONS`) are granted each path's methods and the headers the API takes (`Authorization`, `Content-Type`, `Idempotency-Key`) for 10 minutes, and every answer to them, refusals too, is readable with its `Idempotent-Replayed`, `Retry-After`, `WWW-Authenticate` and `X-Request-Id`. Unset, or another origin: nothing is granted (`OPTIONS` still answers `204` with `Allow`), but for the public `/.well-known/jwks.json`, which every origin may read (`Access-Control-Allow-Origin: *`, preflights granted) so that a page can verify identity tokens, and `/_svc/sdk.js`",
  },
} satisfies Record<string, Setting<unknown>>;

type ValueOf<S> = S extends { parse: Parse<infer T> }
  ? S extends { onlyWith: string }
    ? T | undefined
    : S extends { default: string }
      ? T
      : T | undefined
  : never;

/** Each setting of the table, by its name in code. */
export type Settings = { -readonly [K in keyof typeof settings]: ValueOf<(typeof settings)[K]> };

/** The S3-compatible bucket that keeps the packages. */
export interface PackageBucket {
  bucket: string;
  /** Anything but AWS itself: MinIO, R2, s3rver (`http://127.0.0.1:4568`). */
  endpoint: string | undefined;
  region: string;
  /** `host/bucket/key` instead of `bucket.host/key`, as MinIO-style servers want. */
  forcePathStyle: boolean;
}

/** The embedded broker's TLS listener: where, and the PEM certificate chain and key it shows. */
export interface MqttTls {
  port: number;
  cert: Buffer;
  key: Buffer;
}

type Grouped =
  | 's3Bucket'
  | 's3Endpoint'
  | 's3Region'
  | 's3ForcePathStyle'
  | 'mqttTlsCert'
  | 'mqttTlsKey'
  | 'mqttTlsPort';

export type Config = Omit<Settings, Grouped> & {
  /** Where packages are kept when not in `<dataDir>/blobs`: S3_BUCKET and its settings. */
  packageBucket: PackageBucket | undefined;
  /** The embedded broker's TLS listener, beside the plain one; unset without a certificate. */
  mqttTls: MqttTls | undefined;
  /** Largest JSON request body, in bytes. */
  jsonLimitBytes: number;
  /** Check every response against the contract (tests turn this on). */
  validateResponses: boolean;
};

type Env = Record<string, string | undefined>;

/** A variable's value without its ends' spaces; empty counts as unset. */
function given(env: Env, name: string, keepSpaces = false): string | undefined {
  const value = keepSpaces ? env[name] : env[name]?.trim();
  return value ? value : undefined;
}

/**
 * The setting's text under its name, or under its former name while that is read: the warning
 * names the setting to write instead, with the same value in the new form.
 */
function textOf(env: Env, setting: Setting<unknown>, reading: Reading) {
  const raw = given(env, setting.env, setting.keepSpaces);
  const former = setting.formerly;
  const old = former && given(env, former.name);
  if (!former || old === undefined) return { raw, name: setting.env };
  if (raw !== undefined) {
    throw new ConfigError(
      `${former.name} and ${setting.env} are both set: ${former.name} is ${setting.env}'s former name; unset ${former.name}`,
    );
  }
  const value = /^\d+$/.test(old) ? `${old}${former.unit}` : old;
  if (!reading.formerFormsRead) {
    throw new ConfigError(`${former.name} is now ${setting.env}: set ${setting.env}=${value} instead`);
  }
  reading.warn(
    `${former.name} is now ${setting.env}: set ${setting.env}=${value} instead (${former.name} is refused from svc ${formerFormsRefusedFrom})`,
  );
  return { raw: value, name: former.name };
}

function read(env: Env, setting: Setting<unknown>, reading: Reading): unknown {
  const { raw, name } = textOf(env, setting, reading);
  if (setting.onlyWith && given(env, setting.onlyWith) === undefined) {
    if (raw !== undefined && setting.strayAdvice) {
      throw new ConfigError(`${name} is set but ${setting.onlyWith} is not: ${setting.strayAdvice(name)}`);
    }
    return undefined;
  }
  const text = raw ?? setting.default;
  return text === undefined ? undefined : setting.parse(text, name, reading);
}

/** The checks no one setting can make alone, and the groups the service takes whole. */
function combine(values: Settings): Config {
  const { s3Bucket, s3Endpoint, s3Region, s3ForcePathStyle, mqttTlsCert, mqttTlsKey, mqttTlsPort, ...rest } =
    values;
  if (rest.metricsPort !== 0 && rest.metricsPort === rest.port) {
    throw new ConfigError(
      `METRICS_PORT must differ from PORT (both are ${rest.port}): metrics are never served on the public port`,
    );
  }
  if (rest.databaseUrl && !rest.keyEncryptionKey) {
    throw new ConfigError(
      'SVC_KEY_ENCRYPTION_KEY must be set with DATABASE_URL: 32 random bytes in base64 that encrypt the secrets the database keeps; make one with openssl rand -base64 32 and keep it apart from the database backups (docs/operating.md, "Keys at rest")',
    );
  }
  if (rest.mqttUrl && (!rest.mqttUsername || !rest.mqttPassword)) {
    throw new ConfigError(
      'MQTT_URL needs MQTT_USERNAME and MQTT_PASSWORD: an account of the broker allowed to use $CONTROL/dynamic-security/#',
    );
  }
  return {
    ...rest,
    packageBucket: s3Bucket
      ? {
          bucket: s3Bucket,
          endpoint: s3Endpoint,
          region: s3Region ?? settings.s3Region.default,
          forcePathStyle: s3ForcePathStyle ?? false,
        }
      : undefined,
    mqttTls: mqttTls(mqttTlsCert, mqttTlsKey, mqttTlsPort),
    jsonLimitBytes: 1024 * 1024,
    validateResponses: false,
  };
}

/** Both files or neither; a key that is not the certificate's is a mistake found now, not at a car's first connect. */
function mqttTls(
  cert: Buffer | undefined,
  key: Buffer | undefined,
  port: number | undefined,
): MqttTls | undefined {
  if (!cert && !key) return undefined;
  if (!cert || !key) {
    throw new ConfigError(
      `${cert ? 'MQTT_TLS_CERT' : 'MQTT_TLS_KEY'} is set without ${cert ? 'MQTT_TLS_KEY' : 'MQTT_TLS_CERT'}: the embedded broker's TLS listener needs both PEM files, or neither`,
    );
  }
  try {
    createSecureContext({ cert, key });
  } catch (error) {
    throw new ConfigError(
      `MQTT_TLS_CERT and MQTT_TLS_KEY do not make a TLS identity (${(error as Error).message}): set them to a certificate and its own private key`,
    );
  }
  return { port: port ?? Number(settings.mqttTlsPort.default), cert, key };
}

/**
 * The settings, and the warnings about forms still read but on their way out (a former name, a
 * duration without its unit), which the caller shows the operator at start.
 */
export function readConfig(
  env: Env = process.env,
  options: { release?: string } = {},
): { config: Config; warnings: string[] } {
  const warnings: string[] = [];
  const reading: Reading = {
    formerFormsRead: compareReleases(options.release ?? currentRelease, formerFormsRefusedFrom) < 0,
    warn: (message) => warnings.push(message),
  };
  const values: Record<string, unknown> = {};
  for (const [key, setting] of Object.entries(settings)) {
    values[key] = read(env, setting as Setting<unknown>, reading);
  }
  return { config: combine(values as Settings), warnings };
}

/** The settings alone, for tests and tools with no operator to warn. */
export function loadConfig(env: Env = process.env): Config {
  return readConfig(env).config;
}
