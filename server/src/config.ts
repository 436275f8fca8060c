/**
 * The service's settings, one place: each has its environment variable, default and check.
 * A bad value stops start-up with a message naming the variable.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { createSecureContext } from 'node:tls';
import contract from '../../generated/openapi.json' with { type: 'json' };

export type SignupMode = 'open' | 'closed';

/** The S3-compatible bucket that keeps the packages. */
export interface PackageBucket {
  bucket: string;
  /** Anything but AWS itself: MinIO, R2, s3rver (`http://127.0.0.1:4568`). */
  endpoint: string | undefined;
  region: string;
  /** `host/bucket/key` instead of `bucket.host/key`, as MinIO-style servers want. */
  forcePathStyle: boolean;
}

/** pino's levels, quietest last. */
export const logLevels = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof logLevels)[number];

/** The embedded broker's TLS listener: where, and the PEM certificate chain and key it shows. */
export interface MqttTls {
  port: number;
  cert: Buffer;
  key: Buffer;
}

export interface Config {
  host: string;
  port: number;
  /** Where Prometheus metrics are served (`GET /metrics`): never the public port. */
  metricsHost: string;
  metricsPort: number;
  /**
   * Base URL clients reach this service at; the audience of every sign-in challenge. Unset means
   * `http://HOST:PORT` of the listening socket (so a test on port 0 gets its real port).
   */
  publicUrl: string | undefined;
  dataDir: string;
  /**
   * Where packages are kept when not in `<dataDir>/blobs`: `S3_BUCKET` (with `S3_ENDPOINT`,
   * `S3_REGION`, `S3_FORCE_PATH_STYLE`; credentials from the standard AWS chain). Replicas
   * share it; each one's DATA_DIR then holds no package.
   */
  packageBucket: PackageBucket | undefined;
  /** Postgres connection string; unset means embedded PGlite in `<dataDir>/db`. */
  databaseUrl: string | undefined;
  /**
   * How long a request waits for a store connection (and for Postgres to accept a new one), in
   * milliseconds; past it the request is answered 503.
   */
  databaseAcquireTimeoutMs: number;
  /** Longest a statement may run, lock waits included, in milliseconds (Postgres only); then 503. */
  databaseStatementTimeoutMs: number;
  signup: SignupMode;
  /** Lower-cased emails of the accounts that are admins. */
  adminEmails: ReadonlySet<string>;
  /** Lifetime of an access token, in seconds. */
  tokenTtlSeconds: number;
  /** Largest mini-app package, in bytes. */
  maxPackageBytes: number;
  /** How long a presigned upload URL works, in seconds; also how long its PUT may take to arrive. */
  uploadUrlTtlSeconds: number;
  /**
   * How long any other request (headers and body) may take to arrive, in seconds; also the window
   * over which every body, uploads included, must keep up `minBodyBytesPerSecond`.
   */
  requestTimeoutSeconds: number;
  /** The slowest a request body may arrive, in bytes per second, averaged over each window. */
  minBodyBytesPerSecond: number;
  /**
   * How long an upload in progress holds its URL without news from its receiver, in seconds. The
   * receiver renews the hold while bytes flow; one that died (crash, kill) loses it when it lapses.
   */
  uploadLeaseSeconds: number;
  /** On SIGTERM, how long requests in flight may take to finish before they are cut, in seconds. */
  shutdownGraceSeconds: number;
  /**
   * How often commands not final by their expiry are marked `expired`, and the outbox looks for
   * commands a wake-up missed, in seconds.
   */
  commandSweepSeconds: number;
  /**
   * How long an identity-token signing key signs before the schedule retires it, in seconds; the
   * next key waits as long, published, before it signs.
   */
  signingKeyRotationSeconds: number;
  /** Largest JSON request body, in bytes. */
  jsonLimitBytes: number;
  /**
   * Express's `trust proxy`: which proxies' X-Forwarded-For to believe (e.g. `loopback`, `1`, an
   * address). Unset: none, the socket's address is the client's.
   */
  trustProxy: string | undefined;
  /** Check every response against the contract (tests turn this on). */
  validateResponses: boolean;
  /** The embedded broker's port (on HOST), when `mqttUrl` is unset. */
  mqttPort: number;
  /**
   * The embedded broker's TLS listener (MQTT_TLS_PORT, MQTT_TLS_CERT, MQTT_TLS_KEY), beside the
   * plain one; unset without a certificate.
   */
  mqttTls: MqttTls | undefined;
  /**
   * The certificate authorities (PEM, MQTT_CA) that MQTT_URL's broker must be signed by, with
   * `mqtts://`; unset means the system's.
   */
  mqttCa: Buffer | undefined;
  /**
   * What the embedded broker queues for one car or connector that keeps its session
   * (`clean: false`): QoS 1 messages not yet acknowledged, while it is away or behind. A message
   * past either bound is dropped (as Mosquitto's `max_queued_messages`/`max_queued_bytes` do).
   */
  mqttMaxQueuedMessages: number;
  /** The same queue's bound in bytes of topic and payload. */
  mqttMaxQueuedBytes: number;
  /**
   * A Mosquitto 2 with the dynamic-security plugin (`mqtt://host:port`); unset means the embedded
   * broker. `mqttUsername`/`mqttPassword` sign the service in there: an account allowed to use
   * `$CONTROL/dynamic-security/#` and the car topics.
   */
  mqttUrl: string | undefined;
  mqttUsername: string | undefined;
  mqttPassword: string | undefined;
  /**
   * This replica's name among the service's replicas: its bridge signs in to the broker as
   * `<service user>/bridge-<replicaId>`, so that a restarted replica takes its own broker session
   * back (with what the broker kept for it) instead of leaving it to hold its share of the cars'
   * messages. Each replica needs its own, kept across restarts; one service keeps the default.
   */
  replicaId: string;
  /** Redis for the key-value store (`mqtt:auth:{deviceId}`); unset means a table of the SQL store. */
  redisUrl: string | undefined;
  /**
   * Web origins (`https://app.example.com`) whose pages may call the API from a browser: their
   * preflights are answered and their responses readable. Empty: no cross-origin call is allowed.
   */
  corsOrigins: ReadonlySet<string>;
  /**
   * The key-encryption key (`SVC_KEY_ENCRYPTION_KEY`, 32 bytes): what the database keeps that must
   * stay secret (signing keys' private halves, broker secrets) is stored encrypted with it.
   * Required with DATABASE_URL; embedded mode makes one in `<dataDir>/key-encryption-key`.
   */
  keyEncryptionKey: Buffer | undefined;
  /** The key-encryption key before a rotation: still read, never written with. */
  previousKeyEncryptionKey: Buffer | undefined;
  /** The least severe log lines written (LOG_LEVEL, pino's levels); health probes are `debug`. */
  logLevel: LogLevel;
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

type Env = Record<string, string | undefined>;

function text(env: Env, name: string, fallback: string): string {
  const value = env[name]?.trim();
  return value === undefined || value === '' ? fallback : value;
}

function port(env: Env, name: string, fallback: number): number {
  const raw = text(env, name, String(fallback));
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0 || value > 65535) {
    throw new ConfigError(`${name} must be a port number from 0 to 65535, not "${raw}"`);
  }
  return value;
}

const durationUnits: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/** `3600`, `90s`, `15m`, `1h`, `1d` → seconds. */
export function parseDuration(name: string, raw: string): number {
  const match = /^(\d+)\s*([smhd]?)$/.exec(raw.trim());
  const seconds = match ? Number(match[1]) * (durationUnits[match[2] || 's'] ?? 1) : Number.NaN;
  if (!Number.isSafeInteger(seconds) || seconds <= 0) {
    throw new ConfigError(`${name} must be a positive duration such as 3600, 15m or 1h, not "${raw}"`);
  }
  return seconds;
}

function byteCount(env: Env, name: string, fallback: number, example = '52428800'): number {
  const raw = text(env, name, String(fallback));
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new ConfigError(`${name} must be a positive number of bytes, such as ${example}, not "${raw}"`);
  }
  return value;
}

function count(env: Env, name: string, fallback: number): number {
  const raw = text(env, name, String(fallback));
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(value) || value <= 0) {
    throw new ConfigError(`${name} must be a whole number greater than 0, such as ${fallback}, not "${raw}"`);
  }
  return value;
}

// Node's timers and Postgres's timeouts both hold at most a signed 32-bit count of milliseconds.
const longestTimeoutMs = 2 ** 31 - 1;

function milliseconds(env: Env, name: string, fallback: number): number {
  const raw = text(env, name, String(fallback));
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value <= 0 || value > longestTimeoutMs) {
    throw new ConfigError(
      `${name} must be a whole number of milliseconds from 1 to ${longestTimeoutMs}, such as ${fallback}, not "${raw}"`,
    );
  }
  return value;
}

function url(name: string, raw: string): string {
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be an absolute URL such as https://svc.example.com, not "${raw}"`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new ConfigError(`${name} must be an http or https URL, not "${raw}"`);
  }
  if (parsed.search || parsed.hash) throw new ConfigError(`${name} must not have a query or fragment`);
  return parsed.href.replace(/\/$/, '');
}

/** Comma-separated emails, lower-cased; one that is no email is a mistake to stop at, not to skip. */
function emailList(env: Env, name: string): ReadonlySet<string> {
  const emails = text(env, name, '')
    .split(',')
    .map((email) => email.trim().toLowerCase())
    .filter((email) => email !== '');
  const wrong = emails.find((email) => !/^[^\s@,]+@[^\s@,]+\.[^\s@,]+$/.test(email));
  if (wrong !== undefined) {
    throw new ConfigError(
      `${name} must be emails separated by commas, such as root@example.com,ops@example.com; "${wrong}" is not an email`,
    );
  }
  return new Set(emails);
}

/**
 * Comma-separated web origins: scheme, host and port (`https://app.example.com`,
 * `http://localhost:5173`), kept as a browser writes them in `Origin`. A path, a wildcard or
 * anything else no browser would send is a mistake to stop at: it would never match.
 */
function originList(env: Env, name: string): ReadonlySet<string> {
  const entries = text(env, name, '')
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  const origins = new Set<string>();
  for (const entry of entries) {
    let origin: string | undefined;
    try {
      // URL parsing drops tabs and newlines silently; an origin never holds one.
      if (/\p{Cc}/u.test(entry)) throw new Error('control character');
      const parsed = new URL(entry);
      const bare = !parsed.username && !parsed.password && !parsed.search && !parsed.hash;
      if (['http:', 'https:'].includes(parsed.protocol) && bare && parsed.pathname === '/') {
        // As browsers write it: host lower-cased (IDNs in punycode), no default port.
        origin = parsed.origin;
      }
    } catch {}
    if (!origin) {
      throw new ConfigError(
        `${name} must be web origins separated by commas, such as https://app.example.com,http://localhost:5173 (scheme, host and port, no path); ${JSON.stringify(entry)} is not one`,
      );
    }
    origins.add(origin);
  }
  return origins;
}

function brokerUrl(env: Env): string | undefined {
  const raw = env.MQTT_URL?.trim();
  if (!raw) return undefined;
  let parsed: URL | undefined;
  try {
    parsed = new URL(raw);
  } catch {}
  if (!parsed || !['mqtt:', 'mqtts:'].includes(parsed.protocol) || !parsed.hostname) {
    throw new ConfigError(
      `MQTT_URL must be an mqtt:// or mqtts:// URL such as mqtt://127.0.0.1:1883, not "${raw}"`,
    );
  }
  if (parsed.username || parsed.password) {
    throw new ConfigError(
      'MQTT_URL must not hold a user name or password: set MQTT_USERNAME and MQTT_PASSWORD',
    );
  }
  if (!env.MQTT_USERNAME?.trim() || !env.MQTT_PASSWORD) {
    throw new ConfigError(
      'MQTT_URL needs MQTT_USERNAME and MQTT_PASSWORD: an account of the broker allowed to use $CONTROL/dynamic-security/#',
    );
  }
  return raw;
}

/** A PEM file named by `name`, read now, so that a wrong path stops start-up naming the setting. */
function pemFile(env: Env, name: string): Buffer | undefined {
  const path = env[name]?.trim();
  if (!path) return undefined;
  let content: Buffer;
  try {
    content = readFileSync(path);
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new ConfigError(
      `${name} names ${path}, which cannot be read (${reason}): set ${name} to a PEM file this user may read`,
    );
  }
  if (!content.includes('-----BEGIN ')) {
    throw new ConfigError(
      `${name} names ${path}, which holds no PEM block (-----BEGIN …): set ${name} to a PEM file`,
    );
  }
  return content;
}

/** Both files or neither; a key that is not the certificate's is a mistake found now, not at a car's first connect. */
function mqttTls(env: Env): MqttTls | undefined {
  const cert = pemFile(env, 'MQTT_TLS_CERT');
  const key = pemFile(env, 'MQTT_TLS_KEY');
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
  return { port: port(env, 'MQTT_TLS_PORT', 8883), cert, key };
}

/** Part of an MQTT client id: no `/`, `+`, `#` or spaces, and short enough to read in a log. */
function replicaId(env: Env): string {
  const value = text(env, 'SVC_REPLICA_ID', 'main');
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(value)) {
    throw new ConfigError(
      `SVC_REPLICA_ID must be 1 to 64 letters, digits, '.', '_' or '-' (a name kept across restarts, such as svc-0), not "${value}"`,
    );
  }
  return value;
}

function redisUrl(env: Env): string | undefined {
  const raw = env.REDIS_URL?.trim();
  if (!raw) return undefined;
  if (!/^rediss?:\/\/./.test(raw)) {
    throw new ConfigError(
      `REDIS_URL must be a redis:// or rediss:// URL such as redis://127.0.0.1:6379, not "${raw}"`,
    );
  }
  return raw;
}

/**
 * S3_BUCKET and its settings; the others set without it are a mistake to stop at, since packages
 * would quietly go to DATA_DIR instead.
 */
function packageBucket(env: Env): PackageBucket | undefined {
  const bucket = env.S3_BUCKET?.trim();
  if (!bucket) {
    const stray = ['S3_ENDPOINT', 'S3_REGION', 'S3_FORCE_PATH_STYLE'].find((name) => env[name]?.trim());
    if (stray) {
      throw new ConfigError(
        `${stray} is set but S3_BUCKET is not: set S3_BUCKET to keep packages in that bucket, or unset ${stray} to keep them in DATA_DIR`,
      );
    }
    return undefined;
  }
  // S3's rule for bucket names (MinIO's is the same): what else is set is a typo.
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) {
    throw new ConfigError(
      `S3_BUCKET must be a bucket name (3 to 63 lower-case letters, digits, '.' or '-'), such as svc-packages, not "${bucket}"`,
    );
  }
  const endpoint = env.S3_ENDPOINT?.trim();
  const pathStyle = text(env, 'S3_FORCE_PATH_STYLE', 'false').toLowerCase();
  if (!['true', 'false'].includes(pathStyle)) {
    throw new ConfigError(`S3_FORCE_PATH_STYLE must be true or false, not "${env.S3_FORCE_PATH_STYLE}"`);
  }
  return {
    bucket,
    endpoint: endpoint ? s3Endpoint(endpoint) : undefined,
    region: text(env, 'S3_REGION', 'us-east-1'),
    forcePathStyle: pathStyle === 'true',
  };
}

function s3Endpoint(raw: string): string {
  let parsed: URL | undefined;
  try {
    parsed = new URL(raw);
  } catch {}
  if (!parsed || !['http:', 'https:'].includes(parsed.protocol) || !parsed.hostname) {
    throw new ConfigError(
      `S3_ENDPOINT must be the http:// or https:// URL of an S3-compatible server, such as http://127.0.0.1:9000, not "${raw}"`,
    );
  }
  if (parsed.username || parsed.password || parsed.search || parsed.hash) {
    throw new ConfigError(
      'S3_ENDPOINT must hold no user name, password or query: credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY',
    );
  }
  return parsed.href.replace(/\/$/, '');
}

function oneOf<T extends string>(env: Env, name: string, choices: readonly T[], fallback: T): T {
  const value = text(env, name, fallback);
  if (!(choices as readonly string[]).includes(value)) {
    throw new ConfigError(`${name} must be one of ${choices.join(', ')}, not "${value}"`);
  }
  return value as T;
}

/** Bounded, so that expiry stays timely and the sweep's timer fits Node's (a 32-bit count of ms). */
function commandSweep(env: Env): number {
  const seconds = parseDuration('SVC_COMMAND_SWEEP', text(env, 'SVC_COMMAND_SWEEP', '5s'));
  if (seconds > 3600) {
    throw new ConfigError(
      `SVC_COMMAND_SWEEP must be at most 1h, not ${seconds} seconds: commands expire only when it runs`,
    );
  }
  return seconds;
}

/**
 * At least an hour: the next key must be published well before it signs (verifiers cache the
 * JWKS for minutes), and a key that signs for less than a token's lifetime buys nothing.
 */
function signingKeyRotation(env: Env): number {
  const raw = text(env, 'SVC_SIGNING_KEY_ROTATION', '30d');
  const seconds = parseDuration('SVC_SIGNING_KEY_ROTATION', raw);
  if (seconds < 3600) {
    throw new ConfigError(
      `SVC_SIGNING_KEY_ROTATION must be at least 1h, not "${raw}": a new key is published that long before it signs`,
    );
  }
  return seconds;
}

/**
 * 32 random bytes in base64, as `openssl rand -base64 32` writes them. The message never repeats
 * the value: it is a secret, and may be one pasted into the wrong variable.
 */
function encryptionKey(env: Env, name: string): Buffer | undefined {
  const raw = env[name]?.trim();
  if (!raw) return undefined;
  const bytes = /^[A-Za-z0-9+/]+={0,2}$/.test(raw) ? Buffer.from(raw, 'base64') : undefined;
  if (bytes?.length !== 32) {
    const what = bytes ? `${bytes.length} bytes` : 'not base64';
    throw new ConfigError(
      `${name} must be 32 random bytes in base64, made with openssl rand -base64 32 (the value given is ${what})`,
    );
  }
  return bytes;
}

export function loadConfig(env: Env = process.env): Config {
  const host = text(env, 'HOST', '127.0.0.1');
  const listenPort = port(env, 'PORT', 8080);
  const metricsPort = port(env, 'METRICS_PORT', 9464);
  if (metricsPort !== 0 && metricsPort === listenPort) {
    throw new ConfigError(
      `METRICS_PORT must differ from PORT (both are ${listenPort}): metrics are never served on the public port`,
    );
  }
  const databaseUrl = env.DATABASE_URL?.trim() || undefined;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must be a postgres:// or postgresql:// connection string');
  }
  const keyEncryptionKey = encryptionKey(env, 'SVC_KEY_ENCRYPTION_KEY');
  if (databaseUrl && !keyEncryptionKey) {
    throw new ConfigError(
      'SVC_KEY_ENCRYPTION_KEY must be set with DATABASE_URL: 32 random bytes in base64 that encrypt the secrets the database keeps; make one with openssl rand -base64 32 and keep it apart from the database backups (docs/operating.md, "Keys at rest")',
    );
  }
  return {
    host,
    port: listenPort,
    metricsHost: text(env, 'METRICS_HOST', '127.0.0.1'),
    metricsPort,
    publicUrl: env.SVC_PUBLIC_URL?.trim() ? url('SVC_PUBLIC_URL', env.SVC_PUBLIC_URL.trim()) : undefined,
    dataDir: resolve(text(env, 'DATA_DIR', './.svc-data')),
    packageBucket: packageBucket(env),
    databaseUrl,
    databaseAcquireTimeoutMs: milliseconds(env, 'DATABASE_ACQUIRE_TIMEOUT_MS', 5000),
    databaseStatementTimeoutMs: milliseconds(env, 'DATABASE_STATEMENT_TIMEOUT_MS', 10000),
    signup: oneOf(env, 'SVC_SIGNUP', ['open', 'closed'], 'open'),
    adminEmails: emailList(env, 'SVC_ADMIN_EMAILS'),
    tokenTtlSeconds: parseDuration('SVC_TOKEN_TTL', text(env, 'SVC_TOKEN_TTL', '1h')),
    maxPackageBytes: byteCount(
      env,
      'SVC_MAX_PACKAGE_BYTES',
      contract.components.schemas.PackageLimits.properties.max_package_bytes.default,
    ),
    uploadUrlTtlSeconds: parseDuration('SVC_UPLOAD_URL_TTL', text(env, 'SVC_UPLOAD_URL_TTL', '15m')),
    requestTimeoutSeconds: parseDuration('SVC_REQUEST_TIMEOUT', text(env, 'SVC_REQUEST_TIMEOUT', '30s')),
    minBodyBytesPerSecond: byteCount(env, 'SVC_MIN_BODY_RATE', 1024, '1024'),
    uploadLeaseSeconds: parseDuration('SVC_UPLOAD_LEASE', text(env, 'SVC_UPLOAD_LEASE', '30s')),
    shutdownGraceSeconds: parseDuration('SVC_SHUTDOWN_GRACE', text(env, 'SVC_SHUTDOWN_GRACE', '5s')),
    commandSweepSeconds: commandSweep(env),
    signingKeyRotationSeconds: signingKeyRotation(env),
    trustProxy: env.SVC_TRUST_PROXY?.trim() || undefined,
    jsonLimitBytes: 1024 * 1024,
    validateResponses: false,
    mqttPort: port(env, 'MQTT_PORT', 1883),
    mqttTls: mqttTls(env),
    mqttCa: pemFile(env, 'MQTT_CA'),
    mqttMaxQueuedMessages: count(env, 'MQTT_MAX_QUEUED_MESSAGES', 1000),
    mqttMaxQueuedBytes: byteCount(env, 'MQTT_MAX_QUEUED_BYTES', 1024 * 1024, '1048576'),
    mqttUrl: brokerUrl(env),
    mqttUsername: env.MQTT_URL?.trim() ? env.MQTT_USERNAME?.trim() : undefined,
    mqttPassword: env.MQTT_URL?.trim() ? env.MQTT_PASSWORD : undefined,
    replicaId: replicaId(env),
    redisUrl: redisUrl(env),
    corsOrigins: originList(env, 'SVC_CORS_ORIGINS'),
    keyEncryptionKey,
    previousKeyEncryptionKey: encryptionKey(env, 'SVC_PREVIOUS_KEY_ENCRYPTION_KEY'),
    logLevel: oneOf(env, 'LOG_LEVEL', logLevels, 'info'),
  };
}
