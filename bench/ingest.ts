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
 * keeps up to 64 MiB unsent for the bridge before it slows the cars down (ADR 0056), while
 * Mosquitto queues for the service up to its `max_queued_messages` (100,000 here, as
 * docs/operating.md, "The broker", asks) and drops QoS 1 messages beyond: the bench shows those as lost.
 *
 * Everything shares one machine: the fleet, the service, the subscriber, the broker and Postgres.
 * Read the ratio, not the absolute rates, and compare ratios from one run.
 *
 * Settings (environment): BENCH_CARS (200), BENCH_PROBES probe cars (4), BENCH_TELEMETRY_MS each
 * car's telemetry period (50), BENCH_STATUS_MS its status period (500), BENCH_WARMUP seconds (3),
 * BENCH_DURATION seconds measured (10), BENCH_DRAIN seconds allowed to catch up (60), BENCH_ONLY
 * (e.g. `embedded/pglite,mosquitto/postgres`) to run only some configurations, BENCH_CPU_PROF=<folder>
 * for a V8 CPU profile of each service process (see bench/api.ts), BENCH_BUSY_CORES processes that
 * spin for the whole of each configuration (0), to see how the service does with a core taken by
 * other work, repeatably.
 *
 * Two goals. The service keeps up: stored ≥ 0.8× the bare subscriber, no QoS 1 status lost. The
 * broker keeps up, even with a core busy (issue 29): the bare subscriber receives ≥ 0.9× what the
 * cars sent, and a status shows within 1 s at p99.
 */
import { performance } from 'node:perf_hooks';
import { provisionCars, startSimulator } from '@svc/car-simulator';
import type { Db } from '../server/src/store/db.ts';
import { sample } from '../server/test/support/metrics.ts';
import { busyCoresSetting, keepCoresBusy } from './support/busy-cores.ts';
import { type RunningChild, spawnChild } from './support/children.ts';
import { type MemoryBreakdown, memoryBreakdown } from './support/memory.ts';
import { type ProbeOrder, type ProbeResults, startProbes } from './support/probe-cars.ts';
import {
  type Cleanup,
  type Configuration,
  prepareConfiguration,
  privilegedSignIn,
  runBench,
  type ServiceReady,
  signInAdmin,
  startService,
  storeAndProfileSettings,
} from './support/service.ts';
import { pause, percentile, positiveInteger } from './support/settings.ts';
import { type CountOrder, type StreamCounts, startCounter } from './support/stream-counter.ts';
import { printTable } from './table.ts';

/** Issue 29: at the rate where the bare subscriber saturates, the service stores ≥ 0.8× what it receives. */
const goalRatio = 0.8;
/** What the bare subscriber must receive of what the cars sent, and the status delay's p99 bound. */
const goalDelivered = 0.9;
const goalDelayP99Ms = 1000;
const mib = 1024 * 1024;

/** Parent → service child. */
interface ServeOrder {
  env: Record<string, string>;
}

interface ServiceCounts {
  telemetryRows: number;
  /** Cars with a status report kept. */
  statusCars: number;
  rssBytes: number;
  /** The largest resident set since the last `resetPeak`. */
  peakRssBytes: number;
  /** What the resident set is made of, when asked. */
  memory?: MemoryBreakdown;
}

/** Parent → child: what it has counted so far. */
interface Question {
  /** Start afresh from here: the service's peak memory, the probes' delays. */
  reset?: boolean;
  /** Probes: stop, and count the last ones in. */
  finish?: boolean;
  /** The service: say what its memory is made of. */
  memory?: boolean;
}

/** The bytes of the embedded store's WASM memory (PGlite's Emscripten module), if the store is PGlite. */
function pgliteWasmBytes(db: Db): number | undefined {
  const { connection } = db.client.config as {
    connection?: { pglite?: { mod?: { HEAPU8?: Uint8Array } } };
  };
  return connection?.pglite?.mod?.HEAPU8?.byteLength;
}

/** The service as main.ts starts it, on its own store, which it also counts rows in. */
async function serve({ env }: ServeOrder): Promise<RunningChild<ServiceReady, Question, ServiceCounts>> {
  const service = await startService(env);
  let peak = process.memoryUsage.rss();
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 100);
  const count = async (table: string) =>
    Number((await service.db(table).count<{ count: string | number }>('* as count').first())?.count ?? 0);
  return {
    ready: service.ready,
    async answer({ reset, memory }: Question): Promise<ServiceCounts> {
      const rssBytes = process.memoryUsage.rss();
      peak = Math.max(peak, rssBytes);
      const counts = {
        telemetryRows: await count('car_telemetry'),
        statusCars: await count('car_status_reports'),
        rssBytes,
        peakRssBytes: peak,
        ...(memory ? { memory: memoryBreakdown(pgliteWasmBytes(service.db)) } : {}),
      };
      if (reset) peak = rssBytes;
      return counts;
    },
    async stop() {
      clearInterval(sampler);
      await service.stop();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Parent: children, the fleet, the probes, the report.

interface Settings {
  cars: number;
  probes: number;
  telemetryEveryMs: number;
  statusEveryMs: number;
  warmup: number;
  duration: number;
  drain: number;
  busyCores: number;
  cpuProfDir: string | undefined;
  databaseUrl: string | undefined;
}

interface Measurement extends Configuration {
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
  /** The service's memory at the end of the window, part by part. */
  memory: MemoryBreakdown | undefined;
}

/**
 * Status reports the bridge took: stored, or found older (by the car's own time) than the one kept,
 * which it may be when one car's reports were taken on two of the bridge's connections.
 */
async function statusStored(metricsUrl: string): Promise<number> {
  const metrics = await (await fetch(metricsUrl)).text();
  const taken = (outcome: string) =>
    sample(metrics, 'svc_mqtt_messages_total', { suffix: 'status', outcome });
  return taken('stored') + taken('ignored');
}

/** One configuration, start to end; what it starts is undone at the end (its undoing into `cleanups`). */
async function run(
  { broker, store }: Configuration,
  settings: Settings,
  cleanups: Cleanup[],
): Promise<Measurement> {
  const label = `${broker}-${store}`;
  if (settings.busyCores > 0) {
    const busy = await keepCoresBusy(settings.busyCores);
    cleanups.push(() => busy.stop());
  }
  const { env, mosquitto } = await prepareConfiguration(
    { broker, store },
    { bench: 'ingest', databaseUrl: settings.databaseUrl },
    cleanups,
  );
  const spawn = <Ready, Reply>(mode: string, order: unknown, cpuProfDir?: string) =>
    spawnChild<unknown, Ready, Question, Reply>({ script: import.meta.url, mode, label, order, cpuProfDir });

  const service = await spawn<ServiceReady, ServiceCounts>(
    'serve',
    { env } satisfies ServeOrder,
    settings.cpuProfDir,
  );
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

  const counter = await spawn<true, StreamCounts>('count', {
    signIn: privilegedSignIn(mqttUrl, service.ready, mosquitto, 'bench-counter'),
  } satisfies CountOrder);
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
  const probes = await spawn<true, ProbeResults>('probe', {
    mqttUrl,
    apiUrl,
    token,
    cars: probeCars,
    giveUpMs: 10_000,
  } satisfies ProbeOrder);
  cleanups.unshift(() => probes.stop());

  process.stderr.write(`${label}: warming up ${settings.warmup} s, then measuring ${settings.duration} s\n`);
  await pause(settings.warmup * 1000);
  const readAll = async (question: Question = {}) => {
    const [serviceCounts, bare, status] = await Promise.all([
      service.ask(question),
      counter.ask({}),
      statusStored(metricsUrl),
    ]);
    return { at: performance.now(), service: serviceCounts, bare, status, sent: { ...sent } };
  };
  const [start] = await Promise.all([readAll({ reset: true }), probes.ask({ reset: true })]);
  await pause(settings.duration * 1000);
  const end = await readAll({ memory: true });
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
    memory: end.service.memory,
  };
}

const lost = (row: Measurement) => Math.max(0, row.statusSent - row.statusStored) + row.statusCarsMissing;
const ratio = (row: Measurement) => row.storedPerSecond / row.barePerSecond;
const delivered = (row: Measurement) => row.barePerSecond / row.sentPerSecond;

function report(rows: Measurement[], settings: Settings): void {
  process.stdout.write(
    `\nMQTT ingest on Node ${process.versions.node}: ${settings.cars} cars, telemetry (QoS 0) every ` +
      `${settings.telemetryEveryMs} ms and status (QoS 1) every ${settings.statusEveryMs} ms each, ` +
      `${settings.probes} probe cars; ${settings.duration} s measured after ${settings.warmup} s of warm-up` +
      `${settings.busyCores > 0 ? `; ${settings.busyCores} core(s) kept busy by a spinning process` : ''}\n\n`,
  );
  printTable(
    [
      'broker',
      'store',
      'sent/s',
      'bare/s',
      'bare/sent',
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
      `${delivered(row).toFixed(2)}×`,
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
    'sent/s: what the cars got to the broker; bare/s: what the bare subscriber received; bare/sent: the share\n' +
      'of what the cars sent that reached it; stored/s: telemetry rows plus status reports stored, all over the\n' +
      'measured window. QoS 1 lost: status acknowledged by the broker and never stored, after the catch-up.\n' +
      'delay: publish to GET …/status showing it, over ' +
      `${rows.map((row) => row.delaySamples).join('/')} probes.\n` +
      'RSS: the service process at the end of the window, and its peak during it.\n\n',
  );
  for (const row of rows) {
    if (!row.memory) continue;
    process.stdout.write(`${row.broker}/${row.store}: the service's memory at the end of the window, MiB\n`);
    for (const [part, size] of row.memory.parts)
      process.stdout.write(`  ${part.padEnd(36)} ${size.toFixed(1)}\n`);
  }
  process.stdout.write('\n');
  for (const row of rows) {
    const met = ratio(row) >= goalRatio && lost(row) === 0;
    process.stdout.write(
      `${row.broker}/${row.store}: goal ${met ? 'met' : 'NOT met'}: stored ${ratio(row).toFixed(2)}× the bare ` +
        `subscriber (goal ≥ ${goalRatio}×), ${lost(row)} QoS 1 status lost (goal 0)\n`,
    );
    // Unseen markers count as later than the bound.
    const keptUp = delivered(row) >= goalDelivered && row.delayP99 <= goalDelayP99Ms && row.unseen === 0;
    process.stdout.write(
      `${row.broker}/${row.store}: broker goal ${keptUp ? 'met' : 'NOT met'}: the bare subscriber received ` +
        `${delivered(row).toFixed(2)}× what the cars sent (goal ≥ ${goalDelivered}×), status shown within ` +
        `${row.delayP99.toFixed(0)} ms p99${row.unseen > 0 ? ` and ${row.unseen} never` : ''} ` +
        `(goal ≤ ${goalDelayP99Ms} ms)\n`,
    );
  }
}

function settings(): Settings {
  return {
    cars: positiveInteger('BENCH_CARS', 200, 10),
    probes: positiveInteger('BENCH_PROBES', 4, 1),
    telemetryEveryMs: positiveInteger('BENCH_TELEMETRY_MS', 50),
    statusEveryMs: positiveInteger('BENCH_STATUS_MS', 500),
    warmup: positiveInteger('BENCH_WARMUP', 3, 1),
    duration: positiveInteger('BENCH_DURATION', 10, 1),
    drain: positiveInteger('BENCH_DRAIN', 60),
    busyCores: busyCoresSetting(),
    ...storeAndProfileSettings(),
  };
}

await runBench({
  name: 'ingest',
  children: { serve, count: startCounter, probe: startProbes },
  settings,
  run,
  report,
});
