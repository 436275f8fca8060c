/**
 * The service as the MQTT benchmarks run it: each configuration (the embedded broker or a
 * Mosquitto the bench starts; PGlite in a temporary DATA_DIR or, with DATABASE_URL, a database of
 * its own on that Postgres server) gets a fresh service in a child process, started as main.ts
 * starts it, and an admin signed in as the operator would. Everything a configuration starts is
 * undone at its end, whatever failed.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import knex from 'knex';
import type { AdminCode } from '../../server/src/accounts/admin-codes.ts';
import { createApp } from '../../server/src/app.ts';
import { type Config, loadConfig } from '../../server/src/config.ts';
import { createLogger } from '../../server/src/logger.ts';
import { type Db, embeddedDbDir, openStore } from '../../server/src/store/db.ts';
import { startMosquitto, type TestMosquitto } from '../../server/test/support/mosquitto.ts';
import { errorText, type RunningChild, runChild } from './children.ts';
import { announceSmokeRun } from './settings.ts';

export type BrokerKind = 'embedded' | 'mosquitto';
export type StoreKind = 'pglite' | 'postgres';
export interface Configuration {
  broker: BrokerKind;
  store: StoreKind;
}

export const adminEmail = 'bench@example.com';

/** What the service child reports once it listens. */
export interface ServiceReady {
  url: string;
  metricsUrl: string;
  mqttUrl: string;
  adminCodes: AdminCode[];
  serviceCredential: { username: string; password: string };
}

/** The service as main.ts starts it, in this (child) process, on the store its `env` names. */
export async function startService(
  env: Record<string, string>,
  /** Done on the store before the service starts (bench:fleet forgets what its cars sent last time). */
  beforeStart?: (db: Db) => Promise<void>,
): Promise<{ ready: ServiceReady; db: Db; stop(): Promise<void> }> {
  const config: Config = { ...loadConfig(env), validateResponses: false };
  const logger = createLogger();
  const db = openStore({
    databaseUrl: config.databaseUrl,
    pgliteDir: config.databaseUrl ? undefined : embeddedDbDir(config.dataDir),
    acquireTimeoutMs: config.databaseAcquireTimeoutMs,
    statementTimeoutMs: config.databaseStatementTimeoutMs,
    logger,
  });
  await beforeStart?.(db);
  const app = createApp(config, { db, logger });
  const started = await app.start();
  return {
    ready: {
      url: started.url,
      metricsUrl: started.metricsUrl,
      mqttUrl: started.mqttUrl,
      adminCodes: started.adminCodes,
      serviceCredential: app.broker.serviceCredential,
    },
    db,
    async stop() {
      await app.stop();
      await db.destroy();
    },
  };
}

export async function callJson(url: string, init: { method?: string; token?: string; body?: unknown } = {}) {
  const response = await fetch(url, {
    method: init.method ?? 'GET',
    headers: {
      'content-type': 'application/json',
      ...(init.token ? { authorization: `Bearer ${init.token}` } : {}),
    },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await response.text();
  return { status: response.status, text, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

/**
 * Signs the listed admin up and claims their code, as the operator would; returns a token. On a
 * database kept from an earlier run (bench:fleet's) the admin is there already: it only signs in.
 */
export async function signInAdmin(service: ServiceReady): Promise<string> {
  const password = 'correct horse battery staple';
  const code = service.adminCodes.find((issued) => issued.email === adminEmail)?.code;
  const signup = await callJson(`${service.url}/api/v1/account/signup`, {
    method: 'POST',
    body: { email: adminEmail, password, name: 'Bench' },
  });
  const signedUpBefore = signup.status === 409 && !code;
  if (signup.status !== 201 && !signedUpBefore)
    throw new Error(`sign-up answered ${signup.status}: ${signup.text}`);
  if (!code && !signedUpBefore) throw new Error(`the service issued no admin code for ${adminEmail}`);
  const session = await callJson(`${service.url}/api/v1/account/sessions`, {
    method: 'POST',
    body: { email: adminEmail, password },
  });
  const token = session.body.access_token;
  if (typeof token !== 'string') throw new Error(`sign-in answered ${session.status}: ${session.text}`);
  if (!code) return token;
  const claim = await callJson(`${service.url}/api/v1/account/admin-claims`, {
    method: 'POST',
    token,
    body: { code },
  });
  if (claim.status !== 200) throw new Error(`the admin claim answered ${claim.status}: ${claim.text}`);
  return token;
}

/** How a bare mqtt.js client of the bench signs in to the broker. */
export interface SignIn {
  url: string;
  username: string;
  password: string;
  clientId: string;
  protocolVersion: 4 | 5;
}

/**
 * A sign-in allowed what the service's bridge is (every car's topics): the service's own
 * credential on the embedded broker, the Mosquitto admin (who holds the service's role) on
 * Mosquitto. `name` tells the client apart from the bridge.
 */
export function privilegedSignIn(
  mqttUrl: string,
  service: ServiceReady,
  mosquitto: TestMosquitto | undefined,
  name: string,
): SignIn {
  const { username, password } = mosquitto?.admin ?? service.serviceCredential;
  return {
    url: mqttUrl,
    username,
    password,
    clientId: `${username}/${name}`,
    protocolVersion: mosquitto ? 5 : 4,
  };
}

/** A database of its own on the Postgres server, dropped by `drop`. */
export async function createDatabase(
  serverUrl: string,
  bench: string,
): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `svc_bench_${bench}_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = knex({ client: 'pg', connection: serverUrl, pool: { min: 0, max: 1 } });
  await admin.raw('create database ??', [name]);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.href,
    async drop() {
      await admin.raw('drop database if exists ?? with (force)', [name]);
      await admin.destroy();
    },
  };
}

export type Cleanup = () => Promise<void>;

/**
 * Runs `run`, then every cleanup it registered (newest first: `unshift` them), all of them even
 * when one fails, so that no broker, service or database is left behind; the first failure is thrown.
 */
export async function withCleanups<T>(run: (cleanups: Cleanup[]) => Promise<T>): Promise<T> {
  const cleanups: Cleanup[] = [];
  let failure: unknown;
  let result: T | undefined;
  try {
    result = await run(cleanups);
  } catch (error) {
    failure = error;
  }
  for (const cleanup of cleanups) {
    await cleanup().catch((error: unknown) => {
      failure ??= error;
    });
  }
  if (failure !== undefined) throw failure;
  return result as T;
}

/**
 * What the service of one configuration needs before it starts: a data folder, a database on
 * Postgres, a Mosquitto; its environment. Their undoing goes into `cleanups`.
 */
export async function prepareConfiguration(
  { broker, store }: Configuration,
  options: { bench: string; databaseUrl: string | undefined },
  cleanups: Cleanup[],
): Promise<{ env: Record<string, string>; mosquitto: TestMosquitto | undefined }> {
  const dataDir = mkdtempSync(join(tmpdir(), `svc-bench-${options.bench}-`));
  cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
  const env: Record<string, string> = {
    HOST: '127.0.0.1',
    PORT: '0',
    METRICS_PORT: '0',
    MQTT_PORT: '0',
    DATA_DIR: dataDir,
    SVC_ADMIN_EMAILS: adminEmail,
  };
  if (store === 'postgres') {
    if (!options.databaseUrl) throw new Error('Postgres needs DATABASE_URL');
    const database = await createDatabase(options.databaseUrl, options.bench);
    cleanups.unshift(() => database.drop());
    env.DATABASE_URL = database.url;
    // A database of the bench's own, dropped after: a key made for it alone (keys at rest).
    env.SVC_KEY_ENCRYPTION_KEY = randomBytes(32).toString('base64');
  }
  let mosquitto: TestMosquitto | undefined;
  if (broker === 'mosquitto') {
    const started = await startMosquitto();
    mosquitto = started;
    cleanups.unshift(() => started.stop());
    Object.assign(env, {
      MQTT_URL: started.url,
      MQTT_USERNAME: started.admin.username,
      MQTT_PASSWORD: started.admin.password,
    });
  }
  return { env, mosquitto };
}

/**
 * The configurations to measure: both brokers, on PGlite and (with DATABASE_URL) Postgres, less
 * those BENCH_ONLY (e.g. `embedded/pglite,mosquitto/postgres`) leaves out. A bench that measures
 * fewer by default says which (`byDefault`); BENCH_ONLY may still name any.
 */
export function configurations(
  databaseUrl: string | undefined,
  byDefault?: (configuration: Configuration) => boolean,
): Configuration[] {
  const only = process.env.BENCH_ONLY?.split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  const chosen = (['embedded', 'mosquitto'] as const).flatMap((broker) =>
    (databaseUrl ? (['pglite', 'postgres'] as const) : (['pglite'] as const))
      .map((store) => ({ broker, store }))
      .filter((configuration) =>
        only
          ? only.includes(`${configuration.broker}/${configuration.store}`)
          : (byDefault?.(configuration) ?? true),
      ),
  );
  if (chosen.length === 0) throw new Error(`BENCH_ONLY names no configuration: ${only?.join(', ')}`);
  return chosen;
}

/** DATABASE_URL, and BENCH_CPU_PROF as a folder for V8 CPU profiles of the service processes. */
export function storeAndProfileSettings() {
  return {
    databaseUrl: process.env.DATABASE_URL?.trim() || undefined,
    cpuProfDir: process.env.BENCH_CPU_PROF?.trim() ? resolve(process.env.BENCH_CPU_PROF.trim()) : undefined,
  };
}

// biome-ignore lint/suspicious/noExplicitAny: each mode's child takes an order and questions of its own
type ChildStart = (order: any) => Promise<RunningChild<unknown, any, unknown>>;

/**
 * A benchmark's entry point. Run with a mode (`serve`, …), the file is one of its own child
 * processes; without one, it measures each configuration (`run`, on fresh everything) and
 * reports. It exits 0 whatever the figures: non-zero only when the run itself failed.
 */
export async function runBench<
  Settings extends { databaseUrl: string | undefined; cpuProfDir?: string },
  Row,
>(
  bench: {
    name: string;
    children: Record<string, ChildStart>;
    settings(): Settings;
    run(configuration: Configuration, settings: Settings, cleanups: Cleanup[]): Promise<Row>;
    report(rows: Row[], settings: Settings): void;
    /** The configurations measured unless BENCH_ONLY names others; default every one. */
    byDefault?(configuration: Configuration): boolean;
  },
  mode = process.argv[2],
): Promise<void> {
  if (mode !== undefined) {
    const start = Object.hasOwn(bench.children, mode) ? bench.children[mode] : undefined;
    if (!start) throw new Error(`bench:${bench.name} has no mode ${mode}`);
    runChild(start);
    return;
  }
  try {
    announceSmokeRun(`bench:${bench.name}`);
    const settings = bench.settings();
    const rows: Row[] = [];
    for (const configuration of configurations(settings.databaseUrl, bench.byDefault)) {
      rows.push(await withCleanups((cleanups) => bench.run(configuration, settings, cleanups)));
    }
    bench.report(rows, settings);
    if (settings.cpuProfDir) process.stdout.write(`CPU profiles in ${settings.cpuProfDir}\n`);
  } catch (error) {
    process.stderr.write(`bench:${bench.name} failed: ${errorText(error)}\n`);
    process.exitCode = 1;
  }
}
