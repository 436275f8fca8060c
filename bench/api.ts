// `npm run bench:api`: what our own HTTP stack costs, on two authenticated reads: `GET /api/v1/dev/me`
// (the caller, from the token alone) and the vehicle read `GET /api/v1/cars/{device_id}/status` by the
// car's owner (a store read every request), each against three baselines answering the same JSON.
/*
 * The baselines, each for both paths: a bare Express 5 route answering the JSON as a constant (what
 * Express itself costs: the goal is set against it), a bare Express 5 route doing the same store read
 * first (the account by id; the car's status through the same repository function as ours), and bare
 * node:http answering the constant. Goal (issue 29): the status read at least 0.5× the bare Express
 * constant route on Node 24, with no cache of car state: every read of ours goes to the store.
 *
 * Process layout: this process only generates load (autocannon); each target runs in a child
 * process of its own (this same file, `serve` mode), and only one is sent load at a time, in turns
 * (all of them, then all again: a change of the machine's load meets every target alike). On a
 * 2-core machine that gives the load generator one core and the server the other, instead of both
 * sharing one event loop, where the generator's own cost would shrink every figure and blur the
 * ratios. All targets
 * get the identical layout (same Node flags, same loader, nothing else running), so the only
 * difference between the rows is the server code, which is what the ratios are meant to show.
 * With one core for autocannon, the node-http row is usually bounded by the load generator rather
 * than the server: read it as "at least", a ceiling for reference.
 *
 * The car is set up as a fleet has it: provisioned through the admin API, paired to its owner (the
 * owner written as a pairing writes it) and with a status report stored as the MQTT bridge stores
 * one, so the read answers a real body. The store is the one the service would use: in-memory
 * PGlite, or Postgres when DATABASE_URL is set (all servers on the same database; on PGlite each
 * baseline is given the same rows in a store of its own). Ours answers most requests' caller from
 * its 5-second token cache, which is part of what our stack is; the car's state it reads every time.
 *
 * Settings (environment): BENCH_DURATION seconds measured per target and read (10), taken in
 * BENCH_ROUNDS turns (5); BENCH_WARMUP seconds of warm-up per target and read (3); BENCH_CONNECTIONS
 * (10); BENCH_READS, `me,status` or either alone (a profile of one read). BENCH_CPU_PROF=<folder> writes a V8 CPU profile of
 * each server process in a folder per target there (the largest file is the main thread's; open it
 * in Chrome DevTools or speedscope).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { once } from 'node:events';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import express from 'express';
import { findAccountById, insertAccount } from '../server/src/accounts/account-repository.ts';
import { createApp } from '../server/src/app.ts';
import { findCarStatus, saveStatusReports } from '../server/src/cars/car-report-repository.ts';
import { insertCar } from '../server/src/cars/car-repository.ts';
import { setOwner } from '../server/src/cars/pairing-repository.ts';
import { type Config, loadConfig } from '../server/src/config.ts';
import { type Db, describeStore, migrateToLatest, openStore } from '../server/src/store/db.ts';
import { createDatabase } from './support/service.ts';
import { announceSmokeRun, positiveInteger } from './support/settings.ts';

type Target = 'ours' | 'express' | 'express + store read' | 'node-http';
type Read = 'me' | 'status';

/** What the bench reads: the caller and their car, as ours has them once set up. */
interface Fleet {
  account: { id: string; email: string; name: string };
  car: { deviceId: string; brand: string };
  /** The car's report, as the bridge hands it to the store. */
  report: { hostVersion: string; state: Record<string, unknown>; reportedAt: string };
  seenAt: string;
}

/** A path and the exact JSON text every target answers on it. */
interface Answer {
  path: string;
  body: string;
}

/** Parent → child: which server to run, and for the baselines what they answer and read. */
type ServeOrder =
  | { target: 'ours'; adminEmail: string }
  | { target: Exclude<Target, 'ours'>; answers: Record<Read, Answer>; fleet: Fleet };

/** Parent → the child running ours, once the car is provisioned: pair it and store its report. */
interface CarSetUp {
  fleet: Fleet;
}

/** The store the service would open: Postgres when DATABASE_URL is set, else in-memory PGlite. */
const databaseUrl = process.env.DATABASE_URL?.trim() || undefined;

/** Child → parent. */
type ServeReport = { ready: string; adminCode?: string } | { failed: string } | { carSetUp: true };

const mePath = '/api/v1/dev/me';
const statusPath = (deviceId: string) => `/api/v1/cars/${encodeURIComponent(deviceId)}/status`;
const goalRatio = 0.5;

// ---------------------------------------------------------------------------------------------
// Child process: one server, started on 127.0.0.1 port 0, stopped when the parent says so.

async function listen(server: Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function close(server: Server): Promise<void> {
  const closed = new Promise<void>((done) => server.close(() => done()));
  server.closeAllConnections();
  await closed;
}

/** The car paired to its owner, as a pairing leaves it, and its report stored, as the bridge stores it. */
async function pairAndReport(db: Db, { account, car, report, seenAt }: Fleet): Promise<void> {
  await setOwner(db, car.deviceId, account.id, new Date(seenAt));
  const [stored] = await saveStatusReports(db, [
    {
      report: { deviceId: car.deviceId, installedApps: [], receivedAt: new Date(seenAt), ...report },
      seenAt: new Date(seenAt),
    },
  ]);
  if (stored !== 'stored') throw new Error(`no car ${car.deviceId} to store a report of`);
}

interface RunningTarget {
  url: string;
  /** Ours only: the code that makes the admin account an admin, as the service prints it at start. */
  adminCode?: string;
  stop(): Promise<void>;
  /** Ours only: pairs the provisioned car and stores its report. */
  setUpCar?(fleet: Fleet): Promise<void>;
}

async function startOurs(adminEmail: string): Promise<RunningTarget> {
  // As in production except for the store (in memory) and response validation, which is a test aid.
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-api-'));
  const config: Config = {
    // Every port the service opens is a free one: a Mosquitto or a service may hold the defaults.
    ...loadConfig({
      HOST: '127.0.0.1',
      PORT: '0',
      MQTT_PORT: '0',
      METRICS_PORT: '0',
      DATA_DIR: dataDir,
      SVC_ADMIN_EMAILS: adminEmail,
      // Postgres keeps the secrets sealed (keys at rest): with the key they were sealed with when
      // SVC_KEY_ENCRYPTION_KEY is set, else with one made for this run.
      ...(databaseUrl
        ? {
            DATABASE_URL: databaseUrl,
            SVC_KEY_ENCRYPTION_KEY: process.env.SVC_KEY_ENCRYPTION_KEY ?? randomBytes(32).toString('base64'),
          }
        : {}),
    }),
    validateResponses: false,
  };
  const db = openStore({ databaseUrl });
  const service = createApp(config, { db });
  const { url, adminCodes } = await service.start();
  return {
    url,
    adminCode: adminCodes.find((code) => code.email === adminEmail)?.code,
    setUpCar: (fleet) => pairAndReport(db, fleet),
    async stop() {
      await service.stop();
      await db.destroy();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The baselines' store: ours on Postgres; on PGlite one of their own, given the same rows as ours. */
async function baselineStore(fleet: Fleet): Promise<Db> {
  const db = openStore({ databaseUrl });
  if (databaseUrl) return db;
  await migrateToLatest(db);
  await insertAccount(db, { ...fleet.account, password_hash: null, created_at: new Date() });
  await insertCar(db, {
    device_id: fleet.car.deviceId,
    brand: fleet.car.brand,
    provisioned_at: new Date(fleet.seenAt),
    owner_id: null,
    paired_at: null,
  });
  await pairAndReport(db, fleet);
  return db;
}

async function startTarget(order: ServeOrder): Promise<RunningTarget> {
  if (order.target === 'ours') return startOurs(order.adminEmail);
  const { answers, fleet } = order;
  // The baselines serialize the body on every request, as ours does, so they do the same JSON work.
  const bodies = { me: JSON.parse(answers.me.body), status: JSON.parse(answers.status.body) };
  if (order.target === 'express' || order.target === 'express + store read') {
    const db = order.target === 'express' ? undefined : await baselineStore(fleet);
    const app = express();
    app.disable('x-powered-by');
    app.get(mePath, async (_req, res) => {
      if (db && !(await findAccountById(db, fleet.account.id))) res.status(404).end();
      else res.json(bodies.me);
    });
    app.get('/api/v1/cars/:device_id/status', async (req, res) => {
      if (db && !(await findCarStatus(db, req.params.device_id))) res.status(404).end();
      else res.json(bodies.status);
    });
    const server = createServer(app);
    const url = await listen(server);
    return {
      url,
      async stop() {
        await close(server);
        await db?.destroy();
      },
    };
  }
  const byPath = new Map([
    [answers.me.path, bodies.me],
    [answers.status.path, bodies.status],
  ]);
  const server = createServer((req, res) => {
    const body = req.method === 'GET' ? byPath.get(req.url ?? '') : undefined;
    if (body === undefined) {
      res.writeHead(404).end();
      return;
    }
    const text = JSON.stringify(body);
    res.writeHead(200, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(text),
    });
    res.end(text);
  });
  const url = await listen(server);
  return { url, stop: () => close(server) };
}

function serve(): void {
  const send = (report: ServeReport) => process.send?.(report);
  const failed = (error: unknown) => {
    send({ failed: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    process.exit(1);
  };
  process.once('message', (order: ServeOrder) => {
    startTarget(order).then((running) => {
      // A normal exit (not a kill) lets --cpu-prof write its profile.
      process.once('disconnect', () => {
        running.stop().then(
          () => process.exit(0),
          () => process.exit(1),
        );
      });
      process.on('message', ({ fleet }: CarSetUp) => {
        running.setUpCar?.(fleet).then(() => send({ carSetUp: true }), failed);
      });
      send({ ready: running.url, adminCode: running.adminCode });
    }, failed);
  });
}

// ---------------------------------------------------------------------------------------------
// Parent process: the load generator.

interface Child {
  url: string;
  adminCode?: string;
  /** Sends `message`, and resolves to the child's answer. */
  ask(message: CarSetUp): Promise<ServeReport>;
  stop(): Promise<void>;
}

async function spawnTarget(order: ServeOrder, cpuProfDir: string | undefined): Promise<Child> {
  const name = order.target.replace(/\W+/g, '-');
  const profiling = cpuProfDir
    ? // A folder per target, not a file name: the module loader's thread writes a profile of its own.
      ['--cpu-prof', `--cpu-prof-dir=${join(cpuProfDir, name)}`]
    : [];
  // The server's log (one line per request for ours) goes to a file, as in production: a terminal
  // would be slower than any log shipper, and would bury the results.
  const log = openSync(join(tmpdir(), `svc-bench-api-${process.pid}-${name}.log`), 'w');
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), ['serve'], {
    execArgv: ['--import', import.meta.resolve('tsx'), ...profiling],
    stdio: ['ignore', 'inherit', log, 'ipc'],
  });
  closeSync(log);
  const exited = once(child, 'exit');
  const answer = async (): Promise<ServeReport> => {
    const [report] = (await Promise.race([
      once(child, 'message'),
      exited.then(([code]) => {
        throw new Error(`the ${order.target} server exited (${code})`);
      }),
    ])) as [ServeReport];
    if ('failed' in report) throw new Error(`the ${order.target} server failed:\n${report.failed}`);
    return report;
  };
  child.send(order);
  const report = await answer();
  if (!('ready' in report)) throw new Error(`the ${order.target} server said ${JSON.stringify(report)}`);
  return {
    url: report.ready,
    adminCode: report.adminCode,
    ask(message) {
      child.send(message);
      return answer();
    },
    async stop() {
      if (child.connected) child.disconnect();
      const [code] = await exited;
      if (code !== 0) throw new Error(`the ${order.target} server exited with code ${code}`);
    },
  };
}

async function callJson(
  url: string,
  init: RequestInit & { token?: string } = {},
): Promise<{ status: number; text: string }> {
  const { token, ...rest } = init;
  const response = await fetch(url, {
    ...rest,
    headers: {
      'content-type': 'application/json',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...rest.headers,
    },
  });
  return { status: response.status, text: await response.text() };
}

/** Signs a developer up and in through the real API, as the web console does; returns a `svc_` token. */
async function signIn(base: string, email: string): Promise<string> {
  const password = 'correct horse battery staple';
  const signup = await callJson(`${base}/api/v1/account/signup`, {
    method: 'POST',
    body: JSON.stringify({ email, password, name: 'Bench' }),
  });
  if (signup.status !== 201) throw new Error(`sign-up answered ${signup.status}: ${signup.text}`);
  const session = await callJson(`${base}/api/v1/account/sessions`, {
    method: 'POST',
    body: JSON.stringify({ email, password }),
  });
  if (session.status !== 201) throw new Error(`sign-in answered ${session.status}: ${session.text}`);
  const token: unknown = JSON.parse(session.text).access_token;
  if (typeof token !== 'string' || !token.startsWith('svc_')) {
    throw new Error(`sign-in gave no svc_ token: ${session.text}`);
  }
  return token;
}

/** A VIN of this run's own (17 of the characters VINs use): on Postgres the cars outlive the run. */
function newVin(): string {
  const alphabet = 'ABCDEFGHJKLMNPRSTUVWXYZ0123456789';
  return `BENCH${Array.from({ length: 12 }, () => alphabet[randomInt(alphabet.length)]).join('')}`;
}

/**
 * Sets ours up as a fleet has it: an admin, an owner, a car provisioned through the admin API, paired
 * to the owner, with a status report stored. Returns the owner's token, what is read, and the answers.
 */
async function setUpFleet(
  ours: Child,
  adminEmail: string,
): Promise<{ token: string; fleet: Fleet; answers: Record<Read, Answer> }> {
  // New accounts each run: on Postgres the database outlives the run.
  const run = `${Date.now()}-${randomInt(1e6)}`;
  const adminToken = await signIn(ours.url, adminEmail);
  const claimed = await callJson(`${ours.url}/api/v1/account/admin-claims`, {
    method: 'POST',
    token: adminToken,
    body: JSON.stringify({ code: ours.adminCode }),
  });
  if (claimed.status !== 200) throw new Error(`the admin claim answered ${claimed.status}: ${claimed.text}`);
  const token = await signIn(ours.url, `bench-owner-${run}@example.com`);
  const me = await callJson(`${ours.url}${mePath}`, { token });
  if (me.status !== 200) throw new Error(`${mePath} answered ${me.status}: ${me.text}`);
  const { account } = JSON.parse(me.text) as { account: Fleet['account'] };
  const car = { deviceId: `brand_a:${newVin()}`, brand: 'brand_a' };
  const provisioned = await callJson(`${ours.url}/api/v1/admin/cars`, {
    method: 'POST',
    token: adminToken,
    body: JSON.stringify({ device_id: car.deviceId, brand: car.brand }),
  });
  if (provisioned.status !== 201) {
    throw new Error(`provisioning answered ${provisioned.status}: ${provisioned.text}`);
  }
  const fleet: Fleet = {
    account: { id: account.id, email: account.email, name: account.name },
    car,
    report: {
      hostVersion: '2.14.0',
      state: { ignition: false, doors_locked: true, battery_percent: 81, odometer_km: 23140.5 },
      reportedAt: new Date(Date.now() - 2000).toISOString(),
    },
    seenAt: new Date(Date.now() - 1000).toISOString(),
  };
  await ours.ask({ fleet });
  const path = statusPath(car.deviceId);
  const status = await callJson(`${ours.url}${path}`, { token });
  if (status.status !== 200) throw new Error(`${path} answered ${status.status}: ${status.text}`);
  if (JSON.parse(status.text).state?.doors_locked !== true) {
    throw new Error(`${path} does not show the stored report: ${status.text}`);
  }
  return {
    token,
    fleet,
    answers: { me: { path: mePath, body: me.text }, status: { path, body: status.text } },
  };
}

interface Measurement {
  target: Target;
  requestsPerSecond: number;
  p50: number;
  p99: number;
}

interface LoadOptions {
  url: string;
  headers: Record<string, string>;
  /** Every answer must be exactly `answer.body`, so all targets are known to do the same job. */
  answer: Answer;
  connections: number;
}

/** Nearest-rank percentile of ascending `sorted`, in the unit of its values. */
function percentile(sorted: Float64Array, fraction: number): number {
  return sorted[Math.max(0, Math.ceil(fraction * sorted.length) - 1)] ?? Number.NaN;
}

/** What one autocannon run got: requests answered, over how long, and each one's time. */
interface Slice {
  requests: number;
  seconds: number;
  latencies: number[];
}

/** One autocannon run; throws when any request failed, because a benchmark of errors measures nothing. */
async function load(target: Target, seconds: number, options: LoadOptions): Promise<Slice> {
  // autocannon's own latency histogram keeps whole milliseconds, too coarse for loopback answers that
  // take a fraction of one; its per-response event carries the exact time, so percentiles come from that.
  const latencies: number[] = [];
  const result = await new Promise<autocannon.Result>((done, fail) => {
    const instance = autocannon(
      {
        url: `${options.url}${options.answer.path}`,
        method: 'GET',
        headers: options.headers,
        connections: options.connections,
        duration: seconds,
        expectBody: options.answer.body,
      },
      (error: unknown, result) => (error ? fail(error) : done(result)),
    );
    instance.on('response', (_client, _status, _bytes, responseTime) => latencies.push(responseTime));
  });
  const failures = {
    'non-2xx answers': result.non2xx,
    'connection errors': result.errors,
    timeouts: result.timeouts,
    'bodies unlike the expected one': result.mismatches,
  };
  const found = Object.entries(failures).filter(([, count]) => count > 0);
  if (found.length > 0 || result.requests.total === 0) {
    const counts = found.map(([what, count]) => `${count} ${what}`).join(', ') || 'no requests completed';
    const statuses = JSON.stringify(result.statusCodeStats ?? {});
    throw new Error(`${target} ${options.answer.path}: ${counts} (status codes ${statuses})`);
  }
  return { requests: result.requests.total, seconds: result.duration, latencies };
}

function measurement(target: Target, slices: Slice[]): Measurement {
  const sorted = Float64Array.from(slices.flatMap((slice) => slice.latencies)).sort();
  const requests = slices.reduce((sum, slice) => sum + slice.requests, 0);
  const seconds = slices.reduce((sum, slice) => sum + slice.seconds, 0);
  return {
    target,
    requestsPerSecond: requests / seconds,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
  };
}

interface Settings {
  warmup: number;
  duration: number;
  rounds: number;
  reads: Read[];
  connections: number;
  cpuProfDir: string | undefined;
}

/**
 * Every target and read warmed up, then measured in `rounds` turns of `duration / rounds` seconds
 * each, one after the other: on a machine shared with other work, a change of load meets every
 * target alike, rather than whichever ran at the time.
 */
async function measureInTurns(
  children: Map<Target, Child>,
  settings: Settings,
  answers: Record<Read, Answer>,
  headersOf: (target: Target) => Record<string, string>,
): Promise<Map<string, Measurement>> {
  const options = (target: Target, read: Read) => ({
    url: (children.get(target) as Child).url,
    connections: settings.connections,
    headers: headersOf(target),
    answer: answers[read],
  });
  const slices = new Map<string, Slice[]>();
  process.stderr.write(`warming up each target and read ${settings.warmup} s\n`);
  for (const target of children.keys()) {
    for (const read of settings.reads) await load(target, settings.warmup, options(target, read));
  }
  const sliceSeconds = Math.max(1, Math.round(settings.duration / settings.rounds));
  for (let round = 1; round <= settings.rounds; round += 1) {
    process.stderr.write(`round ${round} of ${settings.rounds}: ${sliceSeconds} s a target and read\n`);
    for (const target of children.keys()) {
      for (const read of settings.reads) {
        const key = `${target}\t${read}`;
        slices.set(key, [
          ...(slices.get(key) ?? []),
          await load(target, sliceSeconds, options(target, read)),
        ]);
      }
    }
  }
  return new Map([...slices].map(([key, taken]) => [key, measurement(key.split('\t')[0] as Target, taken)]));
}

function printTable(rows: Measurement[]): void {
  const header = ['target', 'requests/s', 'p50 ms', 'p99 ms'];
  const cells = rows.map((row) => [
    row.target,
    row.requestsPerSecond.toFixed(0),
    row.p50.toFixed(2),
    row.p99.toFixed(2),
  ]);
  const widths = header.map((title, column) =>
    Math.max(title.length, ...cells.map((cell) => cell[column]?.length ?? 0)),
  );
  const line = (cell: string[]) =>
    cell.map((text, column) =>
      column === 0 ? text.padEnd(widths[column] ?? 0) : text.padStart(widths[column] ?? 0),
    );
  process.stdout.write(`${[header, ...cells].map((cell) => line(cell).join('  ')).join('\n')}\n`);
}

function printRatios(ours: Measurement, baselines: Measurement[]): void {
  for (const baseline of baselines) {
    const ratio = ours.requestsPerSecond / baseline.requestsPerSecond;
    process.stdout.write(`ours / ${baseline.target.padEnd(20)}  ${ratio.toFixed(2)}×\n`);
  }
  process.stdout.write('\n');
}

async function main(): Promise<void> {
  announceSmokeRun('bench:api');
  const reads = (process.env.BENCH_READS?.trim() || 'me,status').split(',').map((read) => read.trim());
  for (const read of reads) {
    if (read !== 'me' && read !== 'status') throw new Error(`BENCH_READS lists me and status, not "${read}"`);
  }
  const settings: Settings = {
    duration: positiveInteger('BENCH_DURATION', 10, 1),
    warmup: positiveInteger('BENCH_WARMUP', 3, 1),
    rounds: positiveInteger('BENCH_ROUNDS', 5, 1),
    reads: reads as Read[],
    connections: positiveInteger('BENCH_CONNECTIONS', 10, 2),
    cpuProfDir: process.env.BENCH_CPU_PROF?.trim() ? resolve(process.env.BENCH_CPU_PROF.trim()) : undefined,
  };

  // Ours first: its real answers become the bodies the baselines send back.
  const adminEmail = `bench-admin-${Date.now()}@example.com`;
  const children = new Map<Target, Child>();
  // On Postgres a database of the run's own, which every target's process is given and which is
  // dropped after: a second run on DATABASE_URL's own database met the first run's signing keys,
  // sealed with that run's key-encryption key, and the service refused to start.
  const database = databaseUrl ? await createDatabase(databaseUrl, 'api') : undefined;
  if (database) process.env.DATABASE_URL = database.url;
  let measured: Map<string, Measurement>;
  try {
    const ours = await spawnTarget({ target: 'ours', adminEmail }, settings.cpuProfDir);
    children.set('ours', ours);
    const { token, fleet, answers } = await setUpFleet(ours, adminEmail);
    for (const target of ['express', 'express + store read', 'node-http'] as const) {
      children.set(target, await spawnTarget({ target, answers, fleet }, settings.cpuProfDir));
    }
    const headersOf = (target: Target): Record<string, string> =>
      target === 'ours' ? { authorization: `Bearer ${token}` } : {};
    measured = await measureInTurns(children, settings, answers, headersOf);
  } finally {
    for (const child of children.values()) await child.stop();
    await database?.drop();
  }

  const sliceSeconds = Math.max(1, Math.round(settings.duration / settings.rounds));
  process.stdout.write(
    `\nNode ${process.versions.node}, ${describeStore({ databaseUrl })}${databaseUrl ? ' (a database of the run’s own on it)' : ''}, ${settings.connections} connections, ` +
      `${settings.rounds} turns of ${sliceSeconds} s a target and read after ${settings.warmup} s of warm-up\n`,
  );
  const rowsOf = (read: Read) =>
    [...children.keys()].map((target) => measured.get(`${target}\t${read}`) as Measurement);
  for (const read of settings.reads) {
    const [ours, ...others] = rowsOf(read) as [Measurement, ...Measurement[]];
    const title = read === 'me' ? `GET ${mePath}` : 'GET /api/v1/cars/{device_id}/status (by its owner)';
    process.stdout.write(`\n${title}\n\n`);
    printTable([ours, ...others]);
    process.stdout.write('\n');
    printRatios(ours, others);
  }
  if (settings.reads.includes('status')) {
    const [ours, bareExpress] = rowsOf('status');
    const toGoal = ours && bareExpress ? ours.requestsPerSecond / bareExpress.requestsPerSecond : 0;
    process.stdout.write(
      `goal (on Node 24): the status read at least ${goalRatio}× the bare Express constant route: ` +
        `${toGoal >= goalRatio ? 'met' : 'NOT met'} here (${toGoal.toFixed(2)}× on Node ${process.versions.node})\n`,
    );
  }
  if (settings.cpuProfDir) process.stdout.write(`CPU profiles in ${settings.cpuProfDir}\n`);
}

if (process.argv[2] === 'serve') {
  serve();
} else {
  // A measurement, not a test: exit 0 whatever the ratio; non-zero only when the run itself failed.
  await main().catch((error: unknown) => {
    process.stderr.write(`bench:api failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  });
}
