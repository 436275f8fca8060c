// `npm run bench:api`: our authenticated `GET /api/v1/dev/me` against a bare Express 5 route that does
// the same store read (the account by id, through the same knex store), and bare node:http.
/*
 * Process layout: this process only generates load (autocannon); each target runs alone in a child
 * process of its own (this same file, `serve` mode), one after the other. On a 2-core machine that
 * gives the load generator one core and the server the other, instead of both sharing one event
 * loop, where the generator's own cost would shrink every figure and blur the ratios. All three
 * targets get the identical layout (same Node flags, same loader, nothing else running), so the
 * only difference between the rows is the server code, which is what the ratios are meant to show.
 * With one core for autocannon, the node-http row is usually bounded by the load generator rather
 * than the server: read it as "at least", a ceiling for reference; the goal is set against Express.
 *
 * The store is the one the service would use: in-memory PGlite, or Postgres when DATABASE_URL is
 * set (both servers on the same database). The Express baseline reads the account by id on every
 * request and answers the same JSON, so the ratio isolates what our stack adds: validation,
 * authentication, errors, request logs. (Ours answers most requests from its 5-second token cache,
 * which is part of what our stack is.)
 *
 * Settings (environment): BENCH_DURATION seconds per measured run (10), BENCH_WARMUP seconds of
 * warm-up per target (3), BENCH_CONNECTIONS (10). BENCH_CPU_PROF=<folder> writes a V8 CPU profile of
 * each server process in a folder per target there (the largest file is the main thread's; open it
 * in Chrome DevTools or speedscope).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
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
import { type Config, loadConfig } from '../server/src/config.ts';
import { describeStore, migrateToLatest, openStore } from '../server/src/store/db.ts';
import { announceSmokeRun, positiveInteger } from './support/settings.ts';

type Target = 'ours' | 'express' | 'node-http';

/** Parent → child: which server to run, and for the baselines the body they answer with. */
interface ServeOrder {
  target: Target;
  body?: unknown;
  /** The account the Express baseline reads on every request, as ours signed it up. */
  account?: { id: string; email: string; name: string };
}

/** The store the service would open: Postgres when DATABASE_URL is set, else in-memory PGlite. */
const databaseUrl = process.env.DATABASE_URL?.trim() || undefined;

/** Child → parent. */
type ServeReport = { ready: string } | { failed: string };

const mePath = '/api/v1/dev/me';
const goalRatio = 0.8;

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

async function startTarget({
  target,
  body,
  account,
}: ServeOrder): Promise<{ url: string; stop(): Promise<void> }> {
  if (target === 'ours') {
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
        // Postgres keeps the secrets sealed (keys at rest): with the key they were sealed with when
        // SVC_KEY_ENCRYPTION_KEY is set, else with one made for this run.
        ...(databaseUrl
          ? {
              DATABASE_URL: databaseUrl,
              SVC_KEY_ENCRYPTION_KEY:
                process.env.SVC_KEY_ENCRYPTION_KEY ?? randomBytes(32).toString('base64'),
            }
          : {}),
      }),
      validateResponses: false,
    };
    const db = openStore({ databaseUrl });
    const service = createApp(config, { db });
    const { url } = await service.start();
    return {
      url,
      async stop() {
        await service.stop();
        await db.destroy();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  }
  // The baselines serialize the body on every request, as ours does, so they do the same JSON work.
  if (target === 'express') {
    if (!account) throw new Error('the express baseline needs the account to read');
    const db = openStore({ databaseUrl });
    // In memory, this process has a store of its own: give it the account ours signed up.
    if (!databaseUrl) {
      await migrateToLatest(db);
      await insertAccount(db, { ...account, password_hash: null, created_at: new Date() });
    }
    const app = express();
    app.disable('x-powered-by');
    app.get(mePath, async (_req, res) => {
      const row = await findAccountById(db, account.id);
      if (!row) res.status(404).end();
      else res.json(body);
    });
    const server = createServer(app);
    const url = await listen(server);
    return {
      url,
      async stop() {
        await close(server);
        await db.destroy();
      },
    };
  }
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || req.url !== mePath) {
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
  process.once('message', (order: ServeOrder) => {
    startTarget(order).then(
      (running) => {
        // A normal exit (not a kill) lets --cpu-prof write its profile.
        process.once('disconnect', () => {
          running.stop().then(
            () => process.exit(0),
            () => process.exit(1),
          );
        });
        send({ ready: running.url });
      },
      (error: unknown) => {
        send({ failed: error instanceof Error ? (error.stack ?? error.message) : String(error) });
        process.exit(1);
      },
    );
  });
}

// ---------------------------------------------------------------------------------------------
// Parent process: the load generator.

interface RunningTarget {
  url: string;
  stop(): Promise<void>;
}

async function spawnTarget(order: ServeOrder, cpuProfDir: string | undefined): Promise<RunningTarget> {
  const profiling = cpuProfDir
    ? // A folder per target, not a file name: the module loader's thread writes a profile of its own.
      ['--cpu-prof', `--cpu-prof-dir=${join(cpuProfDir, order.target)}`]
    : [];
  // The server's log (one line per request for ours) goes to a file, as in production: a terminal
  // would be slower than any log shipper, and would bury the results.
  const log = openSync(join(tmpdir(), `svc-bench-api-${order.target}.log`), 'w');
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), ['serve'], {
    execArgv: ['--import', import.meta.resolve('tsx'), ...profiling],
    stdio: ['ignore', 'inherit', log, 'ipc'],
  });
  closeSync(log);
  const exited = once(child, 'exit');
  child.send(order);
  const [report] = (await Promise.race([
    once(child, 'message'),
    exited.then(([code]) => {
      throw new Error(`the ${order.target} server exited (${code}) before it was ready`);
    }),
  ])) as [ServeReport];
  if ('failed' in report) throw new Error(`the ${order.target} server did not start:\n${report.failed}`);
  return {
    url: report.ready,
    async stop() {
      if (child.connected) child.disconnect();
      const [code] = await exited;
      if (code !== 0) throw new Error(`the ${order.target} server exited with code ${code}`);
    },
  };
}

async function callJson(url: string, init: RequestInit = {}): Promise<{ status: number; text: string }> {
  const response = await fetch(url, {
    ...init,
    headers: { 'content-type': 'application/json', ...init.headers },
  });
  return { status: response.status, text: await response.text() };
}

/** Signs a developer up and in through the real API, as the web console does; returns a `svc_` token. */
async function signIn(base: string): Promise<string> {
  // A new account each run: on Postgres the database outlives the run.
  const email = `bench-${Date.now()}@example.com`;
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

interface Measurement {
  target: Target;
  requestsPerSecond: number;
  p50: number;
  p99: number;
}

interface LoadOptions {
  url: string;
  headers: Record<string, string>;
  /** Every answer must be exactly this text, so all three targets are known to do the same job. */
  expectBody: string;
  connections: number;
}

/** Nearest-rank percentile of ascending `sorted`, in the unit of its values. */
function percentile(sorted: Float64Array, fraction: number): number {
  return sorted[Math.max(0, Math.ceil(fraction * sorted.length) - 1)] ?? Number.NaN;
}

/** One autocannon run; throws when any request failed, because a benchmark of errors measures nothing. */
async function load(
  target: Target,
  seconds: number,
  options: LoadOptions,
): Promise<Omit<Measurement, 'target'>> {
  // autocannon's own latency histogram keeps whole milliseconds, too coarse for loopback answers that
  // take a fraction of one; its per-response event carries the exact time, so percentiles come from that.
  const latencies: number[] = [];
  const result = await new Promise<autocannon.Result>((done, fail) => {
    const instance = autocannon(
      {
        url: `${options.url}${mePath}`,
        method: 'GET',
        headers: options.headers,
        connections: options.connections,
        duration: seconds,
        expectBody: options.expectBody,
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
    throw new Error(`${target}: ${counts} (status codes ${statuses})`);
  }
  const sorted = Float64Array.from(latencies).sort();
  return {
    requestsPerSecond: result.requests.total / result.duration,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
  };
}

async function measure(
  target: Target,
  order: ServeOrder,
  settings: { warmup: number; duration: number; connections: number; cpuProfDir: string | undefined },
  prepare: (url: string) => Promise<Omit<LoadOptions, 'url' | 'connections'>>,
): Promise<Measurement> {
  const running = await spawnTarget(order, settings.cpuProfDir);
  try {
    const options = { url: running.url, connections: settings.connections, ...(await prepare(running.url)) };
    process.stderr.write(
      `${target}: warming up ${settings.warmup} s, then measuring ${settings.duration} s\n`,
    );
    await load(target, settings.warmup, options);
    return { target, ...(await load(target, settings.duration, options)) };
  } finally {
    await running.stop();
  }
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
  process.stdout.write(`${[header, ...cells].map((cell) => line(cell).join('  ')).join('\n')}\n\n`);
}

async function main(): Promise<void> {
  announceSmokeRun('bench:api');
  const settings = {
    duration: positiveInteger('BENCH_DURATION', 10, 1),
    warmup: positiveInteger('BENCH_WARMUP', 3, 1),
    connections: positiveInteger('BENCH_CONNECTIONS', 10, 2),
    cpuProfDir: process.env.BENCH_CPU_PROF?.trim() ? resolve(process.env.BENCH_CPU_PROF.trim()) : undefined,
  };

  // Ours first: its real answer to /dev/me becomes the body the two baselines send back.
  let expectBody = '';
  const ours = await measure('ours', { target: 'ours' }, settings, async (url) => {
    const token = await signIn(url);
    const headers = { authorization: `Bearer ${token}` };
    const me = await callJson(`${url}${mePath}`, { headers });
    if (me.status !== 200) throw new Error(`${mePath} answered ${me.status}: ${me.text}`);
    expectBody = me.text;
    return { headers, expectBody };
  });
  const body = JSON.parse(expectBody) as { account: { id: string; email: string; name: string } };
  const account = { id: body.account.id, email: body.account.email, name: body.account.name };
  const baseline = async () => ({ headers: {}, expectBody });
  const bareExpress = await measure('express', { target: 'express', body, account }, settings, baseline);
  const bareNode = await measure('node-http', { target: 'node-http', body }, settings, baseline);

  process.stdout.write(
    `\nGET ${mePath} on Node ${process.versions.node}, ${describeStore({ databaseUrl })}, ` +
      `${settings.connections} connections, ${settings.duration} s each after ${settings.warmup} s warm-up\n\n`,
  );
  printTable([ours, bareExpress, bareNode]);
  const toExpress = ours.requestsPerSecond / bareExpress.requestsPerSecond;
  const toNode = ours.requestsPerSecond / bareNode.requestsPerSecond;
  process.stdout.write(`ours / express    ${toExpress.toFixed(2)}×\n`);
  process.stdout.write(`ours / node-http  ${toNode.toFixed(2)}×\n`);
  process.stdout.write(
    toExpress >= goalRatio
      ? `goal met: ours is at least ${goalRatio}× bare Express\n`
      : `goal NOT met: ours is below ${goalRatio}× bare Express\n`,
  );
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
