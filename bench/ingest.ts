// `npm run bench:ingest`: how fast the service stores what a fleet of cars sends over MQTT, against
// a bare mqtt.js subscriber counting the same stream in the same run.
/*
 * Process layout: this process is the fleet (the car simulator's 200 cars); the service runs in a
 * child process of its own (this same file, `serve` mode: createApp as main.ts would, on
 * 127.0.0.1), and so do the bare subscriber (`count` mode) and the probe cars (`probe` mode), so
 * that none shares an event loop with the fleet or with another. Each configuration gets a fresh service
 * and database: the embedded broker (aedes, inside the service) or a Mosquitto this bench starts
 * (dynamic security, as the tests start it); PGlite in a temporary DATA_DIR, or, when DATABASE_URL
 * is set, a database of its own on that Postgres server, dropped at the end.
 *
 * The bare subscriber signs in with a credential allowed to read every car (the service's own on
 * the embedded broker, the Mosquitto admin on Mosquitto), subscribes to the same filters at the
 * same QoS as the bridge, and only counts. Both receive the whole stream: on Mosquitto the
 * bridge's subscription is the shared `$share/svc/…` one, of which it is the only member.
 *
 * What is measured, over a window after a warm-up, while the cars send as fast as their timers
 * go: messages stored per second, counted in the database (rows of telemetry history) plus the
 * status reports the bridge stored (its `svc_mqtt_messages_total{suffix="status",outcome="stored"}`,
 * counted once the write committed: the table keeps only each car's last report); and messages
 * per second the bare subscriber received. Then the cars stop and the service is given time to
 * catch up: every QoS 1 status a car had acknowledged by the broker must be stored (nothing lost).
 * The delay: probe cars publish a status with a marker in `state` and poll
 * `GET /api/v1/cars/{id}/status` until it shows the marker (polled every 5–20 ms, so a delay is
 * known to that much). Memory: the service process's resident set, sampled every 100 ms.
 *
 * The default load (about 4,400 messages a second, 20 to 50 times what a real car sends) is one this
 * 2-core machine carries; at 20 ms / 200 ms the fleet outruns it, and then the embedded broker
 * slows the cars down (aedes waits for its slowest subscriber) while Mosquitto queues for the
 * service up to its `max_queued_messages` (100,000 here, as README "The broker" asks) and drops
 * QoS 1 messages beyond: the bench shows those as lost.
 *
 * Everything shares one machine: the fleet, the service, the subscriber, the broker and Postgres.
 * Read the ratio, not the absolute rates, and compare ratios from one run.
 *
 * Settings (environment): BENCH_CARS (200), BENCH_PROBES probe cars (4), BENCH_TELEMETRY_MS each
 * car's telemetry period (50), BENCH_STATUS_MS its status period (500), BENCH_WARMUP seconds (3),
 * BENCH_DURATION seconds measured (10), BENCH_DRAIN seconds allowed to catch up (60), BENCH_ONLY
 * (e.g. `embedded/pglite,mosquitto/postgres`) to run only some configurations, BENCH_CPU_PROF=<folder>
 * for a V8 CPU profile of each service process (see bench/api.ts).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { type CarCredential, provisionCars, startSimulator } from '@svc/car-simulator';
import knex from 'knex';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import {
  type CarStatusReport,
  carTopic,
  carTopicFilter,
  carTopicQos,
  parseCarTopic,
  serviceReceives,
} from '../generated/mqtt.ts';
import type { AdminCode } from '../server/src/accounts/admin-codes.ts';
import { createApp } from '../server/src/app.ts';
import { type Config, loadConfig } from '../server/src/config.ts';
import { createLogger } from '../server/src/logger.ts';
import { embeddedDbDir, openStore } from '../server/src/store/db.ts';
import { sample } from '../server/test/support/metrics.ts';
import { startMosquitto, type TestMosquitto } from '../server/test/support/mosquitto.ts';
import { positiveInteger } from './support/settings.ts';
import { printTable } from './table.ts';

type BrokerKind = 'embedded' | 'mosquitto';
type StoreKind = 'pglite' | 'postgres';

const goalRatio = 0.5;
const mib = 1024 * 1024;
const adminEmail = 'bench@example.com';

interface SignIn {
  url: string;
  username: string;
  password: string;
  clientId: string;
  protocolVersion: 4 | 5;
}

/** Parent → service child. */
interface ServeOrder {
  env: Record<string, string>;
}

interface ServiceReady {
  url: string;
  metricsUrl: string;
  mqttUrl: string;
  adminCodes: AdminCode[];
  serviceCredential: { username: string; password: string };
}

interface ServiceCounts {
  telemetryRows: number;
  /** Cars with a status report kept. */
  statusCars: number;
  rssBytes: number;
  /** The largest resident set since the last `resetPeak`. */
  peakRssBytes: number;
}

/** Parent → counter child. */
interface CountOrder {
  signIn: SignIn;
}

interface StreamCounts {
  status: number;
  telemetry: number;
}

type Report<Ready> = { ready: Ready } | { failed: string };
/** Parent → child: what it has counted so far. */
interface Question {
  id: number;
  /** Start afresh from here: the service's peak memory, the probes' delays. */
  reset?: boolean;
  /** Probes: stop, and count the last ones in. */
  finish?: boolean;
}
interface Answer<Counts> {
  id: number;
  counts: Counts;
}

function errorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  // fetch says only "fetch failed"; the reason is its cause.
  return error.cause
    ? `${error.stack}\ncaused by: ${errorText(error.cause)}`
    : (error.stack ?? error.message);
}

// ---------------------------------------------------------------------------------------------
// Child processes: each waits for its order, reports ready, answers questions, and stops cleanly
// (a normal exit lets --cpu-prof write its profile) when the parent disconnects.

interface RunningChild<Ready, Counts> {
  ready: Ready;
  counts(question: Question): Promise<Counts>;
  stop(): Promise<void>;
}

function runChild<Order, Ready, Counts>(start: (order: Order) => Promise<RunningChild<Ready, Counts>>): void {
  const send = (message: Report<Ready> | Answer<Counts>) => process.send?.(message);
  process.once('message', (order: Order) => {
    start(order).then(
      (running) => {
        process.on('message', (question: Question) => {
          running.counts(question).then(
            (counts) => send({ id: question.id, counts }),
            (error: unknown) => {
              process.stderr.write(`${errorText(error)}\n`);
              process.exit(1);
            },
          );
        });
        process.once('disconnect', () => {
          running.stop().then(
            () => process.exit(0),
            (error: unknown) => {
              process.stderr.write(`${errorText(error)}\n`);
              process.exit(1);
            },
          );
        });
        send({ ready: running.ready });
      },
      (error: unknown) => {
        send({ failed: errorText(error) });
        process.exit(1);
      },
    );
  });
}

/** The service as main.ts starts it, on its own store, which it also counts rows in. */
async function startService({ env }: ServeOrder): Promise<RunningChild<ServiceReady, ServiceCounts>> {
  const config: Config = { ...loadConfig(env), validateResponses: false };
  const logger = createLogger();
  const db = openStore({
    databaseUrl: config.databaseUrl,
    pgliteDir: config.databaseUrl ? undefined : embeddedDbDir(config.dataDir),
    acquireTimeoutMs: config.databaseAcquireTimeoutMs,
    statementTimeoutMs: config.databaseStatementTimeoutMs,
    logger,
  });
  const app = createApp(config, { db, logger });
  const started = await app.start();
  let peak = process.memoryUsage.rss();
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 100);
  const count = async (table: string) =>
    Number((await db(table).count<{ count: string | number }>('* as count').first())?.count ?? 0);
  return {
    ready: {
      url: started.url,
      metricsUrl: started.metricsUrl,
      mqttUrl: started.mqttUrl,
      adminCodes: started.adminCodes,
      serviceCredential: app.broker.serviceCredential,
    } satisfies ServiceReady,
    async counts({ reset }: Question): Promise<ServiceCounts> {
      const rssBytes = process.memoryUsage.rss();
      peak = Math.max(peak, rssBytes);
      const counts = {
        telemetryRows: await count('car_telemetry'),
        statusCars: await count('car_status_reports'),
        rssBytes,
        peakRssBytes: peak,
      };
      if (reset) peak = rssBytes;
      return counts;
    },
    async stop() {
      clearInterval(sampler);
      await app.stop();
      await db.destroy();
    },
  };
}

/** The baseline: the bridge's subscriptions, at its QoS, and a count of status and telemetry. */
async function startCounter({ signIn }: CountOrder): Promise<RunningChild<true, StreamCounts>> {
  const counts: StreamCounts = { status: 0, telemetry: 0 };
  const options: IClientOptions = {
    username: signIn.username,
    password: signIn.password,
    clientId: signIn.clientId,
    protocolVersion: signIn.protocolVersion,
    clean: true,
    reconnectPeriod: 0,
  };
  const client = await mqtt.connectAsync(signIn.url, options);
  client.on('message', (topic) => {
    const suffix = parseCarTopic(topic)?.suffix;
    if (suffix === 'status' || suffix === 'telemetry') counts[suffix] += 1;
  });
  const granted = await client.subscribeAsync(
    Object.fromEntries(
      serviceReceives.map((suffix) => [carTopicFilter(suffix), { qos: carTopicQos[suffix] }]),
    ),
  );
  const refused = granted.filter((grant) => grant.qos >= 0x80);
  if (refused.length > 0)
    throw new Error(`the broker refused ${refused.map((grant) => grant.topic).join(', ')}`);
  return {
    ready: true,
    counts: async () => ({ ...counts }),
    stop: () => client.endAsync(),
  };
}

// ---------------------------------------------------------------------------------------------
// Parent: children, the fleet, the probes, the report.

interface Child<Ready, Counts> {
  ready: Ready;
  ask(question?: Omit<Question, 'id'>): Promise<Counts>;
  stop(): Promise<void>;
  logFile: string;
}

async function spawnChild<Ready, Counts>(
  mode: 'serve' | 'count' | 'probe',
  label: string,
  order: ServeOrder | CountOrder | ProbeOrder,
  cpuProfDir: string | undefined,
): Promise<Child<Ready, Counts>> {
  const profiling =
    cpuProfDir && mode === 'serve' ? ['--cpu-prof', `--cpu-prof-dir=${join(cpuProfDir, label)}`] : [];
  // The service's log goes to a file, as in production; a terminal would slow it and bury the results.
  const logFile = join(tmpdir(), `svc-bench-ingest-${label}-${mode}.log`);
  const log = openSync(logFile, 'w');
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), [mode], {
    execArgv: ['--import', import.meta.resolve('tsx'), ...profiling],
    stdio: ['ignore', 'inherit', log, 'ipc'],
  });
  closeSync(log);
  // A child that died is reported by its exit, below; sending to it must not crash this process.
  child.on('error', () => {});
  const exited = once(child, 'exit');
  const failedEarly = exited.then(([code]) => {
    throw new Error(`the ${mode} process of ${label} exited (${code}); its log: ${logFile}`);
  });
  failedEarly.catch(() => {});
  child.send(order);
  const [report] = (await Promise.race([once(child, 'message'), failedEarly])) as [Report<Ready>];
  if ('failed' in report) throw new Error(`the ${mode} process of ${label} did not start:\n${report.failed}`);
  let asked = 0;
  return {
    ready: report.ready,
    logFile,
    async ask(question = {}) {
      const id = ++asked;
      const answered = new Promise<Counts>((resolveAnswer) => {
        const listen = (message: Answer<Counts>) => {
          if (message.id !== id) return;
          child.off('message', listen);
          resolveAnswer(message.counts);
        };
        child.on('message', listen);
      });
      if (child.connected) child.send({ ...question, id } satisfies Question);
      return Promise.race([answered, failedEarly]);
    },
    async stop() {
      if (child.connected) child.disconnect();
      const [code] = await exited;
      if (code !== 0)
        throw new Error(`the ${mode} process of ${label} exited with ${code}; its log: ${logFile}`);
    },
  };
}

async function callJson(url: string, init: { method?: string; token?: string; body?: unknown } = {}) {
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

/** Signs the listed admin up and claims their code, as the operator would; returns a token. */
async function signInAdmin(service: ServiceReady): Promise<string> {
  const password = 'correct horse battery staple';
  const code = service.adminCodes.find((issued) => issued.email === adminEmail)?.code;
  if (!code) throw new Error(`the service issued no admin code for ${adminEmail}`);
  const signup = await callJson(`${service.url}/api/v1/account/signup`, {
    method: 'POST',
    body: { email: adminEmail, password, name: 'Bench' },
  });
  if (signup.status !== 201) throw new Error(`sign-up answered ${signup.status}: ${signup.text}`);
  const session = await callJson(`${service.url}/api/v1/account/sessions`, {
    method: 'POST',
    body: { email: adminEmail, password },
  });
  const token = session.body.access_token;
  if (typeof token !== 'string') throw new Error(`sign-in answered ${session.status}: ${session.text}`);
  const claim = await callJson(`${service.url}/api/v1/account/admin-claims`, {
    method: 'POST',
    token,
    body: { code },
  });
  if (claim.status !== 200) throw new Error(`the admin claim answered ${claim.status}: ${claim.text}`);
  return token;
}

const pause = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** Nearest-rank percentile of ascending `sorted`. */
function percentile(sorted: number[], fraction: number): number {
  return sorted[Math.max(0, Math.ceil(fraction * sorted.length) - 1)] ?? Number.NaN;
}

/** Parent → probe child. */
interface ProbeOrder {
  mqttUrl: string;
  apiUrl: string;
  token: string;
  cars: CarCredential[];
  /** How long a marker may take to show before it counts as unseen. */
  giveUpMs: number;
}

interface ProbeResults {
  /** Status reports the broker acknowledged. */
  statusSent: number;
  /** Since the last reset, publish to shown, in ms. */
  delaysMs: number[];
  /** Markers that never showed within `giveUpMs`. */
  unseen: number;
}

/**
 * Probe cars, in a process of their own so that the fleet's busy event loop does not add to the
 * delays: each publishes a status with a fresh marker, polls the read route until it shows it,
 * rests 100 ms, and again, until told to finish.
 */
async function startProbes(order: ProbeOrder): Promise<RunningChild<true, ProbeResults>> {
  const results: ProbeResults = { statusSent: 0, delaysMs: [], unseen: 0 };
  let finishing = false;
  const clients: MqttClient[] = [];
  for (const car of order.cars) {
    clients.push(
      await mqtt.connectAsync(order.mqttUrl, {
        clientId: car.deviceId,
        username: car.deviceId,
        password: car.password,
        protocolVersion: 4,
        reconnectPeriod: 0,
      }),
    );
  }
  async function probe(car: CarCredential, client: MqttClient, index: number): Promise<void> {
    const [brand, nativeId] = car.deviceId.split(':') as [CarStatusReport['brand'], string];
    const route = `${order.apiUrl}/api/v1/cars/${encodeURIComponent(car.deviceId)}/status`;
    for (let round = 0; !finishing; round++) {
      const marker = `${index}-${round}`;
      const report: CarStatusReport = {
        device_id: car.deviceId,
        brand,
        reported_at: new Date().toISOString(),
        host_version: '2.14.0',
        state: { ignition: true, probe: marker },
        installed_apps: [],
      };
      const published = performance.now();
      await client.publishAsync(carTopic(brand, nativeId, 'status'), JSON.stringify(report), {
        qos: carTopicQos.status,
      });
      results.statusSent += 1;
      let seen = false;
      for (let poll = 0; !seen && performance.now() - published < order.giveUpMs; poll++) {
        const answer = await callJson(route, { token: order.token });
        if (answer.status !== 200) throw new Error(`GET status answered ${answer.status}: ${answer.text}`);
        seen = (answer.body.state as Record<string, unknown> | undefined)?.probe === marker;
        if (!seen) await pause(Math.min(20, 5 * 2 ** poll));
      }
      if (seen) results.delaysMs.push(performance.now() - published);
      else results.unseen += 1;
      await pause(100);
    }
  }
  const probing = Promise.all(
    order.cars.map((car, index) => probe(car, clients[index] as MqttClient, index)),
  );
  // A probe that fails fails the run: its question is answered by the exit.
  probing.catch((error: unknown) => {
    process.stderr.write(`${errorText(error)}\n`);
    process.exit(1);
  });
  let stopped: Promise<void> | undefined;
  const stop = () => {
    finishing = true;
    stopped ??= probing.then(async () => {
      await Promise.all(clients.map((client) => client.endAsync()));
    });
    return stopped;
  };
  return {
    ready: true,
    async counts({ reset, finish }) {
      if (finish) await stop();
      const counted = { ...results, delaysMs: [...results.delaysMs] };
      if (reset) {
        results.delaysMs = [];
        results.unseen = 0;
      }
      return counted;
    },
    stop,
  };
}

interface Settings {
  cars: number;
  probes: number;
  telemetryEveryMs: number;
  statusEveryMs: number;
  warmup: number;
  duration: number;
  drain: number;
  cpuProfDir: string | undefined;
  databaseUrl: string | undefined;
}

interface Measurement {
  broker: BrokerKind;
  store: StoreKind;
  sentPerSecond: number;
  barePerSecond: number;
  storedPerSecond: number;
  statusSent: number;
  statusStored: number;
  statusCarsMissing: number;
  telemetrySent: number;
  telemetryStored: number;
  drainSeconds: number;
  delayP50: number;
  delayP99: number;
  delaySamples: number;
  unseen: number;
  rssMib: number;
  peakRssMib: number;
}

/** A database of its own on the Postgres server, dropped by `drop`. */
async function createDatabase(serverUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `svc_bench_ingest_${process.pid}_${randomBytes(4).toString('hex')}`;
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

async function statusStored(metricsUrl: string): Promise<number> {
  const metrics = await (await fetch(metricsUrl)).text();
  return sample(metrics, 'svc_mqtt_messages_total', { suffix: 'status', outcome: 'stored' });
}

type Cleanup = () => Promise<void>;

/** One configuration, start to end; every step runs, so that no broker or service is left behind. */
async function measure(broker: BrokerKind, store: StoreKind, settings: Settings): Promise<Measurement> {
  const cleanups: Cleanup[] = [];
  let failure: unknown;
  const measured = await run(broker, store, settings, cleanups).catch((error: unknown) => {
    failure = error;
  });
  for (const cleanup of cleanups) {
    await cleanup().catch((error: unknown) => {
      failure ??= error;
    });
  }
  if (failure !== undefined || !measured) throw failure;
  return measured;
}

/** Starts what `broker` and `store` need (its undoing goes first into `cleanups`), then measures. */
async function run(
  broker: BrokerKind,
  store: StoreKind,
  settings: Settings,
  cleanups: Cleanup[],
): Promise<Measurement> {
  const label = `${broker}-${store}`;
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-ingest-'));
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
    if (!settings.databaseUrl) throw new Error('Postgres needs DATABASE_URL');
    const database = await createDatabase(settings.databaseUrl);
    cleanups.unshift(() => database.drop());
    env.DATABASE_URL = database.url;
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

  const service = await spawnChild<ServiceReady, ServiceCounts>('serve', label, { env }, settings.cpuProfDir);
  cleanups.unshift(() => service.stop());
  const { url: apiUrl, metricsUrl, mqttUrl } = service.ready;
  const token = await signInAdmin(service.ready);
  process.stderr.write(`${label}: provisioning ${settings.cars + settings.probes} cars\n`);
  const credentials = await provisionCars({
    apiUrl,
    token,
    count: settings.cars + settings.probes,
    brand: 'brand_a',
  });
  const fleetCars = credentials.slice(0, settings.cars);
  const probeCars = credentials.slice(settings.cars);

  // Whoever may read every car: the service itself on the embedded broker, the admin on Mosquitto.
  const reader = mosquitto?.admin ?? service.ready.serviceCredential;
  const counter = await spawnChild<true, StreamCounts>(
    'count',
    label,
    {
      signIn: {
        url: mqttUrl,
        ...reader,
        clientId: `${reader.username}/bench-counter`,
        protocolVersion: mosquitto ? 5 : 4,
      },
    } satisfies CountOrder,
    undefined,
  );
  cleanups.unshift(() => counter.stop());

  // What the fleet's cars got to the broker: QoS 1 once acknowledged.
  const sent = { status: 0, telemetry: 0 };
  const warnings: string[] = [];
  process.stderr.write(`${label}: ${settings.cars} cars driving\n`);
  const fleet = await startSimulator({
    mqttUrl,
    cars: fleetCars,
    statusEveryMs: settings.statusEveryMs,
    telemetryEveryMs: settings.telemetryEveryMs,
    output: { write: () => true },
    warnings: { write: (text: string) => warnings.push(text) },
    sent: (_deviceId, suffix) => {
      if (suffix === 'status' || suffix === 'telemetry') sent[suffix] += 1;
    },
  });
  let fleetStopped = false;
  cleanups.unshift(async () => {
    if (!fleetStopped) await fleet.stop();
  });
  const probes = await spawnChild<true, ProbeResults>(
    'probe',
    label,
    { mqttUrl, apiUrl, token, cars: probeCars, giveUpMs: 10_000 } satisfies ProbeOrder,
    undefined,
  );
  cleanups.unshift(() => probes.stop());

  process.stderr.write(`${label}: warming up ${settings.warmup} s, then measuring ${settings.duration} s\n`);
  await pause(settings.warmup * 1000);
  const readAll = async (question: Omit<Question, 'id'> = {}) => {
    const [serviceCounts, bare, status] = await Promise.all([
      service.ask(question),
      counter.ask(),
      statusStored(metricsUrl),
    ]);
    return { at: performance.now(), service: serviceCounts, bare, status, sent: { ...sent } };
  };
  const [start] = await Promise.all([readAll({ reset: true }), probes.ask({ reset: true })]);
  await pause(settings.duration * 1000);
  const end = await readAll();
  const probed = await probes.ask({ finish: true });
  await fleet.stop();
  fleetStopped = true;
  const statusSent = sent.status + probed.statusSent;

  // Catching up: every QoS 1 status the broker acknowledged should end up stored.
  process.stderr.write(
    `${label}: cars stopped; waiting up to ${settings.drain} s for the service to catch up\n`,
  );
  const drainStarted = performance.now();
  let last = await readAll();
  for (let stableSince = performance.now(); performance.now() - drainStarted < settings.drain * 1000; ) {
    await pause(250);
    const now = await readAll();
    const moved = now.service.telemetryRows !== last.service.telemetryRows || now.status !== last.status;
    last = now;
    if (moved) stableSince = performance.now();
    if (now.status >= statusSent && performance.now() - stableSince >= 1000) break;
  }
  const drainSeconds = (performance.now() - drainStarted) / 1000;

  const seconds = (end.at - start.at) / 1000;
  const rate = (before: number, after: number) => (after - before) / seconds;
  const delays = [...probed.delaysMs].sort((a, b) => a - b);
  if (warnings.length > 0) {
    process.stderr.write(`${label}: the cars warned ${warnings.length} times, first: ${warnings[0]}`);
  }
  return {
    broker,
    store,
    sentPerSecond: rate(start.sent.status + start.sent.telemetry, end.sent.status + end.sent.telemetry),
    barePerSecond: rate(start.bare.status + start.bare.telemetry, end.bare.status + end.bare.telemetry),
    storedPerSecond: rate(start.status + start.service.telemetryRows, end.status + end.service.telemetryRows),
    statusSent,
    statusStored: last.status,
    statusCarsMissing: credentials.length - last.service.statusCars,
    telemetrySent: sent.telemetry,
    telemetryStored: last.service.telemetryRows,
    drainSeconds,
    delayP50: percentile(delays, 0.5),
    delayP99: percentile(delays, 0.99),
    delaySamples: delays.length,
    unseen: probed.unseen,
    rssMib: end.service.rssBytes / mib,
    peakRssMib: end.service.peakRssBytes / mib,
  };
}

const lost = (row: Measurement) => Math.max(0, row.statusSent - row.statusStored) + row.statusCarsMissing;
const ratio = (row: Measurement) => row.storedPerSecond / row.barePerSecond;

function report(rows: Measurement[], settings: Settings): void {
  process.stdout.write(
    `\nMQTT ingest on Node ${process.versions.node}: ${settings.cars} cars, telemetry (QoS 0) every ` +
      `${settings.telemetryEveryMs} ms and status (QoS 1) every ${settings.statusEveryMs} ms each, ` +
      `${settings.probes} probe cars; ${settings.duration} s measured after ${settings.warmup} s of warm-up\n\n`,
  );
  printTable(
    [
      'broker',
      'store',
      'sent/s',
      'bare/s',
      'stored/s',
      'stored/bare',
      'QoS 1 sent',
      'stored',
      'lost',
      'QoS 0 sent',
      'stored',
      'catch-up s',
      'delay p50 ms',
      'p99 ms',
      'RSS MiB',
      'peak MiB',
    ],
    rows.map((row) => [
      row.broker,
      row.store,
      row.sentPerSecond.toFixed(0),
      row.barePerSecond.toFixed(0),
      row.storedPerSecond.toFixed(0),
      `${ratio(row).toFixed(2)}×`,
      String(row.statusSent),
      String(row.statusStored),
      String(lost(row)),
      String(row.telemetrySent),
      String(row.telemetryStored),
      row.drainSeconds.toFixed(1),
      row.delayP50.toFixed(0),
      `${row.delayP99.toFixed(0)}${row.unseen > 0 ? ` (+${row.unseen} unseen)` : ''}`,
      row.rssMib.toFixed(0),
      row.peakRssMib.toFixed(0),
    ]),
    2,
  );
  process.stdout.write(
    'sent/s: what the cars got to the broker; bare/s: what the bare subscriber received; stored/s: telemetry\n' +
      'rows plus status reports stored, all over the measured window. QoS 1 lost: status acknowledged by the\n' +
      'broker and never stored, after the catch-up. delay: publish to GET …/status showing it, over ' +
      `${rows.map((row) => row.delaySamples).join('/')} probes.\n` +
      'RSS: the service process at the end of the window, and its peak during it.\n\n',
  );
  for (const row of rows) {
    const met = ratio(row) >= goalRatio && lost(row) === 0;
    process.stdout.write(
      `${row.broker}/${row.store}: goal ${met ? 'met' : 'NOT met'}: stored ${ratio(row).toFixed(2)}× the bare ` +
        `subscriber (goal ≥ ${goalRatio}×), ${lost(row)} QoS 1 status lost (goal 0)\n`,
    );
  }
}

async function main(): Promise<void> {
  const databaseUrl = process.env.DATABASE_URL?.trim() || undefined;
  const settings: Settings = {
    cars: positiveInteger('BENCH_CARS', 200),
    probes: positiveInteger('BENCH_PROBES', 4),
    telemetryEveryMs: positiveInteger('BENCH_TELEMETRY_MS', 50),
    statusEveryMs: positiveInteger('BENCH_STATUS_MS', 500),
    warmup: positiveInteger('BENCH_WARMUP', 3),
    duration: positiveInteger('BENCH_DURATION', 10),
    drain: positiveInteger('BENCH_DRAIN', 60),
    cpuProfDir: process.env.BENCH_CPU_PROF?.trim() ? resolve(process.env.BENCH_CPU_PROF.trim()) : undefined,
    databaseUrl,
  };
  const only = process.env.BENCH_ONLY?.split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  const configurations = (['embedded', 'mosquitto'] as const).flatMap((broker) =>
    (databaseUrl ? (['pglite', 'postgres'] as const) : (['pglite'] as const))
      .map((store) => ({ broker, store }))
      .filter(({ broker, store }) => !only || only.includes(`${broker}/${store}`)),
  );
  if (configurations.length === 0) throw new Error(`BENCH_ONLY names no configuration: ${only?.join(', ')}`);
  const rows: Measurement[] = [];
  for (const { broker, store } of configurations) rows.push(await measure(broker, store, settings));
  report(rows, settings);
  if (settings.cpuProfDir) process.stdout.write(`CPU profiles in ${settings.cpuProfDir}\n`);
}

const mode = process.argv[2];
if (mode === 'serve') {
  runChild(startService);
} else if (mode === 'count') {
  runChild(startCounter);
} else if (mode === 'probe') {
  runChild(startProbes);
} else {
  // A measurement, not a test: exit 0 whatever the figures; non-zero only when the run itself failed.
  await main().catch((error: unknown) => {
    process.stderr.write(`bench:ingest failed: ${errorText(error)}\n`);
    process.exitCode = 1;
  });
}
