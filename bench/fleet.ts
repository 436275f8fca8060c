// `npm run bench:fleet`: 10,000 simulated cars, each with its own credential, on Mosquitto with
// dynamic security and Postgres, with one service and with two replicas sharing the stream (issue 29).
/*
 * The fleet is provisioned once through the service (`POST /api/v1/admin/cars` a car, as an
 * operator's script would) and kept (bench/support/fleet-provisioning.ts): Mosquitto 2.0's
 * dynamic-security plugin writes its whole file after every change, so provisioning grows with
 * the square of the fleet, and 10,000 cars take long. The time is recorded every 250 cars and
 * reported at 1,000 / 5,000 / 10,000 whenever the kept fleet is used (with when it was measured).
 *
 * Process layout: this process polls the API and reports; the fleet's cars run in BENCH_FLEET_PROCESSES
 * child processes (`cars` mode, the car simulator, 2,500 cars each by default), so that one event
 * loop does not pace them all; the service (`serve`), or each of its two replicas, the bare
 * subscriber (`count`), the probe cars (`probe`) and the command measurer (`measure`) run in
 * processes of their own. Each configuration gets a fresh Mosquitto started from the kept
 * dynamic-security file, and the kept database with what cars sent last time forgotten (telemetry,
 * status reports, presence), so that every car starts offline with nothing reported.
 *
 * Each configuration:
 * 1. The service starts (with two replicas: SVC_REPLICA_ID svc-1 and svc-2 on the one database,
 *    sharing the cars' messages through `$share/svc/…`); its start syncs the broker credentials
 *    (a list of every dynsec client), so its time is reported.
 * 2. The cars connect, spread evenly over BENCH_CONNECT_SPREAD seconds (30), each with its
 *    credential, a retained `offline` last will, then `online` and a status report; they send
 *    telemetry (QoS 0) every BENCH_TELEMETRY_MS (5 s) and status (QoS 1) every BENCH_STATUS_MS
 *    (60 s), each timer starting at a random point of its period. Reported: when every car had
 *    its connection, and when every car showed `online` in `GET /api/v1/admin/cars` (all pages of
 *    200, asked again every second), both from the first connection.
 * 3. After BENCH_WARMUP seconds, a window of BENCH_DURATION seconds: messages stored per second
 *    (the bridges' `svc_mqtt_messages_total{outcome="stored"}` of status, telemetry and presence,
 *    summed over replicas) against what a bare mqtt.js subscriber with the bridge's subscriptions
 *    received; the delay from a probe car's status to `GET …/status` showing it (bench/support/probe-cars.ts);
 *    and command round trips to BENCH_COMMAND_CARS (100) random cars, through the service and as a
 *    bare mqtt.js publish, rounds alternating (bench/commands.ts), goal ≤ 2 × bare p99 + 50 ms.
 * 4. The cars stop; every QoS 1 status and presence a car had acknowledged by the broker must be
 *    stored (nothing lost), and every car must have a status report kept.
 * Memory: each service process's peak resident set over the whole configuration (VmHWM), CPU:
 * each process's CPU time over the window (and over the connections) as a share of one core;
 * the same for Mosquitto and the fleet's processes, to show what the machine was doing.
 *
 * Everything shares one 2-core machine: the fleet, the service, the broker and Postgres. Compare
 * within a run. File descriptors: Mosquitto holds one per car, inherited from this process's
 * limit (`ulimit -n`), which must exceed the fleet; the bench says so before it starts.
 *
 * Settings (environment): BENCH_CARS (10000; smoke 50), BENCH_PROBES (4), BENCH_FLEET_PROCESSES
 * (4), BENCH_CONNECT_SPREAD seconds (30), BENCH_ONLINE_WAIT seconds after it for every car to show
 * `online` (600), BENCH_TELEMETRY_MS (5000), BENCH_STATUS_MS (60000),
 * BENCH_WARMUP seconds (10), BENCH_DURATION seconds (60), BENCH_DRAIN seconds (120),
 * BENCH_COMMAND_CARS (100), BENCH_ROUNDS command rounds a path (3), BENCH_REPLICAS (`1,2`),
 * BENCH_FLEET_CACHE (node_modules/.cache/svc-bench-fleet), BENCH_FLEET_REPROVISION=1 to provision
 * again, DATABASE_URL (Postgres; without it PGlite and one replica), BENCH_CPU_PROF. A smoke run
 * (BENCH_SMOKE=1) provisions a small fleet of its own and throws it away.
 */
import { appendFileSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { type CarCredential, type Simulator, startSimulator } from '@svc/car-simulator';
import type { Db } from '../server/src/store/db.ts';
import { sample } from '../server/test/support/metrics.ts';
import { startMosquitto } from '../server/test/support/mosquitto.ts';
import { type Child, errorText, type RunningChild, spawnChild } from './support/children.ts';
import {
  type MeasureOrder,
  measureCommandRounds,
  type PathFigures,
  type RoundOrder,
  type RoundResult,
  startMeasurer,
} from './support/command-rounds.ts';
import {
  discardFleet,
  type FleetCache,
  fleetFolder,
  fleetServiceEnv,
  milestoneSeconds,
  type ProvisioningRecord,
  type ProvisioningRoute,
  provisionedFleet,
  provisioningConcurrency,
} from './support/fleet-provisioning.ts';
import { type ProbeOrder, type ProbeQuestion, type ProbeResults, startProbes } from './support/probe-cars.ts';
import {
  type Cleanup,
  type Configuration,
  callJson,
  privilegedSignIn,
  runBench,
  type ServiceReady,
  signInAdmin,
  startService,
  storeAndProfileSettings,
} from './support/service.ts';
import { pause, percentile, positiveInteger, smokeRun } from './support/settings.ts';
import { type CountOrder, type StreamCounts, startCounter } from './support/stream-counter.ts';
import { printTable } from './table.ts';

const mib = 1024 * 1024;
const goal = { delayP99Ms: 1000, rssMib: 512 };
/** What the bench's Mosquitto is told beyond the tests' settings: docs/operating.md's bounds. */
const brokerSettings = ['max_connections -1', 'max_inflight_messages 20', 'max_keepalive 300'];

// ---------------------------------------------------------------------------------------------
// Children.

/** Parent → service child. */
interface ServeOrder {
  env: Record<string, string>;
  /** The first process on the kept database forgets what the cars sent last time. */
  forgetReports: boolean;
}

interface ServiceQuestion {
  /** Count the cars with a status report kept. */
  countStatus?: boolean;
  /** Say where the completed commands' time went, from their own times. */
  commandSteps?: boolean;
}

/** From a command's making to the broker taking it, and from then to `completed` stored: p50, p99 ms. */
interface CommandSteps {
  madeToSent: [number, number];
  sentToCompleted: [number, number];
}

interface ProcessUsage {
  rssBytes: number;
  /** The largest resident set since the process started (VmHWM). */
  peakRssBytes: number;
  /** User + system CPU time since it started, in µs. */
  cpuMicros: number;
}

interface ServiceUsage extends ProcessUsage {
  statusCars?: number;
  commandSteps?: CommandSteps;
}

/** The completed commands' steps by their `created_at`, `sent_at` and `updated_at` (the service's clock). */
async function commandSteps(db: Db): Promise<CommandSteps> {
  const { rows } = await db.raw(
    `select percentile_disc(array[0.5, 0.99]) within group (order by extract(epoch from sent_at - created_at) * 1000) as made_to_sent,
            percentile_disc(array[0.5, 0.99]) within group (order by extract(epoch from updated_at - sent_at) * 1000) as sent_to_completed
     from car_commands where state = 'completed' and sent_at is not null`,
  );
  const [row] = rows as { made_to_sent: number[] | null; sent_to_completed: number[] | null }[];
  const pair = (values: number[] | null | undefined): [number, number] => [
    Number(values?.[0] ?? Number.NaN),
    Number(values?.[1] ?? Number.NaN),
  ];
  return { madeToSent: pair(row?.made_to_sent), sentToCompleted: pair(row?.sent_to_completed) };
}

function ownUsage(): ProcessUsage {
  const status = readFileSync('/proc/self/status', 'utf8');
  const peak = /^VmHWM:\s+(\d+) kB/m.exec(status);
  const cpu = process.cpuUsage();
  const rssBytes = process.memoryUsage.rss();
  return {
    rssBytes,
    peakRssBytes: peak ? Number(peak[1]) * 1024 : rssBytes,
    cpuMicros: cpu.user + cpu.system,
  };
}

/** The service as main.ts starts it, on the kept store. */
async function serve({
  env,
  forgetReports,
}: ServeOrder): Promise<RunningChild<ServiceReady, ServiceQuestion, ServiceUsage>> {
  const service = await startService(
    env,
    forgetReports
      ? async (db) => {
          await db('car_telemetry').truncate();
          await db('car_status_reports').delete();
          await db('car_presence').update({ online: false });
          await db('car_commands').delete();
        }
      : undefined,
  );
  return {
    ready: service.ready,
    async answer({ countStatus, commandSteps: steps }) {
      const usage: ServiceUsage = ownUsage();
      if (steps) usage.commandSteps = await commandSteps(service.db);
      if (countStatus)
        usage.statusCars = Number(
          (await service.db('car_status_reports').count<{ count: string | number }>('* as count').first())
            ?.count ?? 0,
        );
      return usage;
    },
    stop: () => service.stop(),
  };
}

/** Parent → a process of the fleet's cars. */
interface CarsOrder {
  mqttUrl: string;
  cars: CarCredential[];
  telemetryEveryMs: number;
  statusEveryMs: number;
  connectSpreadMs: number;
}

interface CarsReady {
  /** Wall-clock ms (one machine, one clock) when the first car began to connect, and the last had. */
  connectingAt: number;
  connectedAt: number;
}

interface CarsQuestion {
  /** Every car says `offline` and disconnects; the counts then include everything. */
  stop?: boolean;
}

interface CarsCounts extends ProcessUsage {
  /** What the cars got to the broker (QoS 1: acknowledged). */
  sent: { status: number; telemetry: number; presence: number };
  warnings: number;
  firstWarnings: string[];
}

async function startCars(order: CarsOrder): Promise<RunningChild<CarsReady, CarsQuestion, CarsCounts>> {
  const sent = { status: 0, telemetry: 0, presence: 0 };
  const warnings: string[] = [];
  let warningCount = 0;
  const connectingAt = Date.now();
  const simulator: Simulator = await startSimulator({
    mqttUrl: order.mqttUrl,
    cars: order.cars,
    telemetryEveryMs: order.telemetryEveryMs,
    statusEveryMs: order.statusEveryMs,
    connectSpreadMs: order.connectSpreadMs,
    // Enough lanes that a slow CONNACK does not hold the cars behind it back from their time.
    connectConcurrency: 100,
    connectTimeoutMs: 30_000,
    output: { write: () => true },
    warnings: {
      write: (text: string) => {
        warningCount += 1;
        if (warnings.length < 3) warnings.push(text.trim());
      },
    },
    sent: (_deviceId, suffix) => {
      if (suffix === 'status' || suffix === 'telemetry' || suffix === 'presence') sent[suffix] += 1;
    },
  });
  const connectedAt = Date.now();
  let stopped: Promise<number> | undefined;
  const stop = () => {
    stopped ??= simulator.stop();
    return stopped;
  };
  return {
    ready: { connectingAt, connectedAt },
    async answer(question) {
      if (question.stop) await stop();
      return { ...ownUsage(), sent: { ...sent }, warnings: warningCount, firstWarnings: warnings };
    },
    async stop() {
      await stop();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Parent.

interface Settings {
  cars: number;
  probes: number;
  processes: number;
  connectSpreadS: number;
  /** How long after the connections' spread every car may take to show `online` before the bench goes on without. */
  onlineWaitS: number;
  telemetryEveryMs: number;
  statusEveryMs: number;
  warmup: number;
  duration: number;
  drain: number;
  commandCars: number;
  rounds: number;
  replicas: number[];
  reprovision: boolean;
  provisioningRoute: ProvisioningRoute;
  databaseUrl: string | undefined;
  cpuProfDir: string | undefined;
}

interface ReplicaRun {
  replicas: number;
  /** Until every service process listened, s. */
  serviceStartS: number;
  /** From the first car's connection: every car connected, every car `online` in the API, s. */
  connectedS: number;
  onlineS: number;
  /** Cars not `online` in the API when it gave up waiting (0 when every one was). */
  neverOnline: number;
  windowS: number;
  sentPerS: number;
  barePerS: number;
  storedPerS: number;
  qos1Sent: number;
  qos1Stored: number;
  statusCarsMissing: number;
  delayP50: number;
  delayP99: number;
  delaySamples: number;
  unseen: number;
  commands: { bare: PathFigures; service: PathFigures; catchUpMs: number; steps?: CommandSteps };
  /** Per service process. */
  servicePeakRssMib: number[];
  serviceCpuPercent: number[];
  serviceCpuPercentConnecting: number[];
  brokerRssMib: number;
  brokerPeakRssMib: number;
  brokerCpuPercent: number;
  /** Every Postgres process's, as a share of one core (NaN on PGlite). */
  databaseCpuPercent: number;
  fleetCpuPercent: number;
  fleetRssMib: number;
  carWarnings: number;
  firstWarnings: string[];
  loadBefore: string;
  loadAfter: string;
}

interface FleetResult extends Configuration {
  provisioning: ProvisioningRecord;
  /** Provisioned by this run (else reused). */
  provisionedNow: boolean;
  runs: ReplicaRun[];
  skipped: string[];
}

const loadAverage = () =>
  loadavg()
    .map((load) => load.toFixed(2))
    .join(' ');

/** A process's CPU time from /proc/<pid>/stat, in µs (clock ticks of 10 ms: Linux's USER_HZ). */
function cpuMicrosOf(pid: number | string): number {
  // Fields after the command name (in parentheses, which may hold spaces): utime is the 14th field.
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/** Mosquitto's memory and CPU time from /proc. */
function brokerUsage(pid: number | undefined): ProcessUsage {
  if (pid === undefined) return { rssBytes: Number.NaN, peakRssBytes: Number.NaN, cpuMicros: Number.NaN };
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]) * 1024;
  return { rssBytes: kib('VmRSS'), peakRssBytes: kib('VmHWM'), cpuMicros: cpuMicrosOf(pid) };
}

/**
 * CPU time of every Postgres process on this machine (the server and its backends, whoever they
 * serve): Postgres runs beside the bench, not as its child. NaN on PGlite, which is in the service.
 */
function databaseCpuMicros(onPostgres: boolean): number {
  if (!onPostgres) return Number.NaN;
  let micros = 0;
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres') micros += cpuMicrosOf(pid);
    } catch {
      // Gone between the listing and the reading.
    }
  }
  return micros;
}

/**
 * Messages the bridges took, summed over the service processes: stored, or found older (by the
 * car's own time) than the one kept, as the bridge may when two replicas take one car's reports.
 */
async function storedCounts(metricsUrls: string[]) {
  const counts = { status: 0, telemetry: 0, presence: 0 };
  for (const url of metricsUrls) {
    const metrics = await (await fetch(url)).text();
    for (const suffix of ['status', 'telemetry', 'presence'] as const)
      for (const outcome of ['stored', 'ignored'])
        counts[suffix] += sample(metrics, 'svc_mqtt_messages_total', { suffix, outcome });
  }
  return counts;
}

/** How many of `fleet` `GET /api/v1/admin/cars` shows `online`, every page of 200 read. */
async function carsOnline(apiUrl: string, token: string, fleet: Set<string>): Promise<number> {
  let online = 0;
  let cursor: string | null = null;
  do {
    const page = await callJson(
      `${apiUrl}/api/v1/admin/cars?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      { token },
    );
    if (page.status !== 200) throw new Error(`GET /api/v1/admin/cars answered ${page.status}: ${page.text}`);
    for (const car of page.body.cars as { device_id: string; online: boolean }[])
      if (car.online && fleet.has(car.device_id)) online += 1;
    cursor = page.body.next_cursor as string | null;
  } while (cursor);
  return online;
}

function randomCars(cars: CarCredential[], count: number): string[] {
  const ids = cars.map((car) => car.deviceId);
  for (let index = ids.length - 1; index > 0; index--) {
    const other = Math.floor(Math.random() * (index + 1));
    [ids[index], ids[other]] = [ids[other] as string, ids[index] as string];
  }
  return ids.slice(0, count);
}

/** How long a child may take to stop before it is killed (a service stopping with a bridge far behind). */
const stopWaitMs = 60_000;

/** Stops `child`, or kills it when it has not ended within stopWaitMs; says which. */
function stopOrKill(child: Child<unknown, never, unknown>, name: string): Cleanup {
  return async () => {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), stopWaitMs);
    });
    const ended = await Promise.race([child.stop().then(() => 'stopped' as const), late]);
    clearTimeout(timer);
    if (ended === 'late') {
      process.stderr.write(
        `fleet: the ${name} process did not stop within ${stopWaitMs / 1000} s: killed (its log: ${child.logFile})\n`,
      );
      child.kill();
    }
  };
}

/** One configuration: `replicas` service processes on the kept fleet, from a fresh broker to the drain. */
async function runReplicas(
  replicas: number,
  cache: FleetCache,
  settings: Settings,
  cleanups: Cleanup[],
): Promise<ReplicaRun> {
  const label = `fleet-${replicas}-replica${replicas > 1 ? 's' : ''}`;
  const log = (line: string) => process.stderr.write(`${label}: ${line}\n`);
  const { fleet } = cache;
  const loadBefore = loadAverage();
  const mosquitto = await startMosquitto({
    dynsec: { file: cache.dynsecFile, admin: fleet.brokerAdmin },
    settings: brokerSettings,
  });
  cleanups.unshift(() => mosquitto.stop());
  const spawn = <Order, Ready, Question, Reply>(mode: string, order: Order, name = mode, profile = false) =>
    spawnChild<Order, Ready, Question, Reply>({
      script: import.meta.url,
      mode,
      label: `${label}-${name}`,
      order,
      cpuProfDir: profile ? settings.cpuProfDir : undefined,
    });

  log(`starting ${replicas} service process(es) on the kept fleet`);
  const serviceStarted = performance.now();
  const services: Child<ServiceReady, ServiceQuestion, ServiceUsage>[] = [];
  for (let index = 0; index < replicas; index++) {
    const env = fleetServiceEnv(fleet, settings.databaseUrl, mosquitto.url, cleanups);
    if (replicas > 1) env.SVC_REPLICA_ID = `svc-${index + 1}`;
    const service = await spawn<ServeOrder, ServiceReady, ServiceQuestion, ServiceUsage>(
      'serve',
      { env, forgetReports: index === 0 },
      `serve-${index + 1}`,
      true,
    );
    cleanups.unshift(stopOrKill(service, `serve-${index + 1}`));
    services.push(service);
  }
  const serviceStartS = (performance.now() - serviceStarted) / 1000;
  const [first] = services as [Child<ServiceReady, ServiceQuestion, ServiceUsage>];
  const apiUrl = first.ready.url;
  const metricsUrls = services.map((service) => service.ready.metricsUrl);
  const token = await signInAdmin(first.ready);

  const counter = await spawn<CountOrder, true, unknown, StreamCounts>('count', {
    signIn: privilegedSignIn(mosquitto.url, first.ready, mosquitto, 'bench-counter'),
  });
  cleanups.unshift(stopOrKill(counter, 'count'));

  // The cars, split over processes, connecting evenly over the spread.
  const shards = Array.from({ length: settings.processes }, (_, shard) =>
    fleet.cars.filter((_car, index) => index % settings.processes === shard),
  ).filter((cars) => cars.length > 0);
  log(
    `${fleet.cars.length} cars connecting over ${settings.connectSpreadS} s from ${shards.length} processes`,
  );
  const servicesBefore = await Promise.all(services.map((service) => service.ask({})));
  const connecting = performance.now();
  const fleetChildren: Child<CarsReady, CarsQuestion, CarsCounts>[] = [];
  const started = Promise.all(
    shards.map(async (cars, shard) => {
      const child = await spawn<CarsOrder, CarsReady, CarsQuestion, CarsCounts>(
        'cars',
        {
          mqttUrl: mosquitto.url,
          cars,
          telemetryEveryMs: settings.telemetryEveryMs,
          statusEveryMs: settings.statusEveryMs,
          connectSpreadMs: settings.connectSpreadS * 1000,
        },
        `cars-${shard + 1}`,
      );
      fleetChildren.push(child);
      cleanups.unshift(stopOrKill(child, `cars-${shard + 1}`));
      return child.ready;
    }),
  );
  let startFailure: unknown;
  let connectedAt: number | undefined;
  started.then(
    (readies) => {
      connectedAt = Math.max(...readies.map((ready) => ready.connectedAt));
    },
    (error: unknown) => {
      startFailure = error;
    },
  );

  // Every car `online` in the API.
  const fleetIds = new Set(fleet.cars.map((car) => car.deviceId));
  const giveUp = connecting + (settings.connectSpreadS + settings.onlineWaitS) * 1000;
  let online = 0;
  let onlineAt = Number.NaN;
  let lastLog = 0;
  while (performance.now() < giveUp) {
    if (startFailure) throw startFailure;
    online = await carsOnline(apiUrl, token, fleetIds);
    if (online === fleetIds.size && connectedAt !== undefined) {
      onlineAt = Date.now();
      break;
    }
    if (performance.now() - lastLog > 5000) {
      lastLog = performance.now();
      log(`${online} of ${fleetIds.size} cars online in the API`);
    }
    await pause(1000);
  }
  const readies = await started;
  const servicesConnected = await Promise.all(services.map((service) => service.ask({})));
  const connectingS = (performance.now() - connecting) / 1000;
  const firstConnection = Math.min(...readies.map((ready) => ready.connectingAt));
  const connectedS = (Math.max(...readies.map((ready) => ready.connectedAt)) - firstConnection) / 1000;
  const onlineS = (onlineAt - firstConnection) / 1000;
  log(
    Number.isNaN(onlineAt)
      ? `gave up: ${online} of ${fleetIds.size} online in the API`
      : `every car connected after ${connectedS.toFixed(1)} s, online in the API after ${onlineS.toFixed(1)} s`,
  );

  const probes = await spawn<ProbeOrder, true, ProbeQuestion, ProbeResults>('probe', {
    mqttUrl: mosquitto.url,
    apiUrl,
    token,
    cars: fleet.probes,
    giveUpMs: 10_000,
  });
  cleanups.unshift(stopOrKill(probes, 'probe'));
  const measurer = await spawn<MeasureOrder, true, RoundOrder, RoundResult>('measure', {
    apiUrl,
    token,
    signIn: privilegedSignIn(mosquitto.url, first.ready, mosquitto, 'bench-commands'),
    deviceIds: randomCars(fleet.cars, settings.commandCars),
    spreadMs: 1000,
  });
  cleanups.unshift(stopOrKill(measurer, 'measure'));

  log(`warming up ${settings.warmup} s, then measuring ${settings.duration} s`);
  await pause(settings.warmup * 1000);
  const readAll = async (question: ServiceQuestion & ProbeQuestion = {}) => {
    const [serviceUsage, cars, bare, stored, probed] = await Promise.all([
      Promise.all(services.map((service) => service.ask({ countStatus: question.countStatus }))),
      Promise.all(fleetChildren.map((child) => child.ask({}))),
      counter.ask({}),
      storedCounts(metricsUrls),
      question.reset ? probes.ask({ reset: true }) : undefined,
    ]);
    return {
      at: performance.now(),
      services: serviceUsage,
      cars,
      bare,
      stored,
      probed,
      broker: brokerUsage(mosquitto.pid()),
      databaseCpuMicros: databaseCpuMicros(settings.databaseUrl !== undefined),
    };
  };
  const start = await readAll({ reset: true });
  const [commands] = await Promise.all([
    measureCommandRounds({
      measurer,
      metricsUrls,
      rounds: settings.rounds,
      cars: settings.commandCars,
      label,
    }),
    pause(settings.duration * 1000),
  ]);
  const end = await readAll();
  const probed = await probes.ask({ finish: true });

  log('cars stopping');
  const stoppedCars = await Promise.all(fleetChildren.map((child) => child.ask({ stop: true })));
  const sentOf = (suffix: 'status' | 'presence') =>
    stoppedCars.reduce((sum, counts) => sum + counts.sent[suffix], 0) +
    (suffix === 'status' ? probed.statusSent : 0);
  const qos1Sent = sentOf('status') + sentOf('presence');
  log(`waiting up to ${settings.drain} s for the service to store every QoS 1 message`);
  const drainStarted = performance.now();
  let stored = await storedCounts(metricsUrls);
  for (let stableSince = performance.now(); performance.now() - drainStarted < settings.drain * 1000; ) {
    await pause(500);
    const now = await storedCounts(metricsUrls);
    const moved = now.status !== stored.status || now.presence !== stored.presence;
    stored = now;
    if (moved) stableSince = performance.now();
    const caughtUp = now.status >= sentOf('status') && now.presence >= sentOf('presence');
    if (caughtUp && performance.now() - stableSince >= 1000) break;
  }
  const finalUsage = await Promise.all(
    services.map((service, index) => service.ask({ countStatus: true, commandSteps: index === 0 })),
  );
  const qos1Stored =
    Math.min(stored.status, sentOf('status')) + Math.min(stored.presence, sentOf('presence'));

  const windowS = (end.at - start.at) / 1000;
  const perS = (before: number, after: number) => (after - before) / windowS;
  const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);
  const sentTotal = (read: typeof start) =>
    sum(read.cars.map((counts) => counts.sent.status + counts.sent.telemetry));
  // The bare subscriber counts status and telemetry; presence is a few a second at most once all are online.
  const bareTotal = (read: typeof start) => read.bare.status + read.bare.telemetry;
  const storedBareTotal = (read: typeof start) => read.stored.status + read.stored.telemetry;
  const cpuPercent = (before: ProcessUsage, after: ProcessUsage, seconds: number) =>
    ((after.cpuMicros - before.cpuMicros) / 1e6 / seconds) * 100;
  const delays = [...probed.delaysMs].sort((a, b) => a - b);
  const warnings = stoppedCars.reduce((total, counts) => total + counts.warnings, 0);
  return {
    replicas,
    serviceStartS,
    connectedS,
    onlineS,
    neverOnline: fleetIds.size - online,
    windowS,
    sentPerS: perS(sentTotal(start), sentTotal(end)),
    barePerS: perS(bareTotal(start), bareTotal(end)),
    storedPerS: perS(storedBareTotal(start), storedBareTotal(end)),
    qos1Sent,
    qos1Stored,
    statusCarsMissing: fleet.cars.length + fleet.probes.length - (finalUsage[0]?.statusCars ?? 0),
    delayP50: percentile(delays, 0.5),
    delayP99: percentile(delays, 0.99),
    delaySamples: delays.length,
    unseen: probed.unseen,
    commands: { ...commands, steps: finalUsage[0]?.commandSteps },
    servicePeakRssMib: finalUsage.map((usage) => usage.peakRssBytes / mib),
    serviceCpuPercent: end.services.map((usage, index) =>
      cpuPercent(start.services[index] as ProcessUsage, usage, windowS),
    ),
    serviceCpuPercentConnecting: servicesConnected.map((usage, index) =>
      cpuPercent(servicesBefore[index] as ProcessUsage, usage, connectingS),
    ),
    brokerRssMib: end.broker.rssBytes / mib,
    brokerPeakRssMib: end.broker.peakRssBytes / mib,
    brokerCpuPercent: cpuPercent(start.broker, end.broker, windowS),
    databaseCpuPercent: ((end.databaseCpuMicros - start.databaseCpuMicros) / 1e6 / windowS) * 100,
    fleetCpuPercent: sum(
      end.cars.map((usage, index) => cpuPercent(start.cars[index] as ProcessUsage, usage, windowS)),
    ),
    fleetRssMib: sum(end.cars.map((usage) => usage.rssBytes)) / mib,
    carWarnings: warnings,
    firstWarnings: stoppedCars.flatMap((counts) => counts.firstWarnings).slice(0, 3),
    loadBefore,
    loadAfter: loadAverage(),
  };
}

/** Mosquitto holds a descriptor per car, under this process's limit, which it inherits. */
function checkDescriptorLimit(cars: number): void {
  const limits = readFileSync('/proc/self/limits', 'utf8');
  const soft = Number(/^Max open files\s+(\d+)/m.exec(limits)?.[1]);
  const needed = cars + 1024;
  if (soft < needed)
    throw new Error(
      `Mosquitto needs a file descriptor per car: raise this shell's limit to at least ${needed} (\`ulimit -n ${needed}\`; it is ${soft})`,
    );
}

async function run(
  configuration: Configuration,
  settings: Settings,
  cleanups: Cleanup[],
): Promise<FleetResult> {
  checkDescriptorLimit(settings.cars + settings.probes);
  const log = (line: string) => process.stderr.write(`fleet: ${line}\n`);
  const folder = smokeRun
    ? mkdtempSync(join(tmpdir(), 'svc-bench-fleet-'))
    : fleetFolder(settings.cars, settings.probes);
  const reprovision = smokeRun || settings.reprovision;
  // A smoke run's fleet is its own (two runs at once on one Postgres meet nothing of each other's)
  // and goes with it, a failed provisioning's too.
  const smokeDatabase = `svc_bench_fleet_smoke_${process.pid}`;
  if (smokeRun)
    cleanups.unshift(() => discardFleet({ folder, database: smokeDatabase }, settings.databaseUrl));
  const cache = await provisionedFleet({
    folder,
    cars: settings.cars,
    probes: settings.probes,
    databaseUrl: settings.databaseUrl,
    ...(smokeRun ? { database: smokeDatabase } : {}),
    reprovision,
    route: smokeRun ? 'mosquitto' : settings.provisioningRoute,
    brokerSettings,
    log,
    startService: (env) =>
      spawnChild<ServeOrder, ServiceReady, ServiceQuestion, ServiceUsage>({
        script: import.meta.url,
        mode: 'serve',
        label: 'fleet-provisioning',
        order: { env, forgetReports: false },
      }),
  });
  const runs: ReplicaRun[] = [];
  const skipped: string[] = [];
  for (const replicas of settings.replicas) {
    if (replicas > 1 && !settings.databaseUrl) {
      skipped.push(`${replicas} replicas: they share one Postgres (DATABASE_URL); PGlite is one process's`);
      continue;
    }
    // Each configuration's processes end before the next starts; one that fails to end loses no figures.
    const own: Cleanup[] = [];
    try {
      const row = await runReplicas(replicas, cache, settings, own);
      runs.push(row);
      // Kept as measured, in case a later configuration fails the run.
      appendFileSync(
        join(cache.folder, 'measured.jsonl'),
        `${JSON.stringify({ date: new Date().toISOString(), node: process.versions.node, settings, row })}\n`,
      );
      log(`${replicas} replica(s) measured: ${JSON.stringify(row)}`);
    } finally {
      for (const cleanup of own)
        await cleanup().catch((error: unknown) => log(`a cleanup failed: ${errorText(error)}`));
    }
  }
  return {
    ...configuration,
    provisioning: cache.fleet.provisioning,
    provisionedNow: !cache.reused,
    runs,
    skipped,
  };
}

const figure = (value: number, digits = 0) => (Number.isFinite(value) ? value.toFixed(digits) : '–');
const lost = (row: ReplicaRun) => row.qos1Sent - row.qos1Stored + row.statusCarsMissing;
const commandGoalMs = (row: ReplicaRun) => 2 * row.commands.bare.p99 + 50;

function report(results: FleetResult[], settings: Settings): void {
  for (const result of results) {
    const { provisioning } = result;
    process.stdout.write(
      `\nbench:fleet on Node ${process.versions.node}: ${settings.cars} cars (+${settings.probes} probe cars) on Mosquitto ` +
        `with dynamic security and ${result.store === 'postgres' ? 'Postgres' : 'PGlite'}; telemetry (QoS 0) every ` +
        `${settings.telemetryEveryMs} ms and status (QoS 1) every ${settings.statusEveryMs} ms a car; connections ` +
        `spread over ${settings.connectSpreadS} s from ${settings.processes} processes; ${settings.duration} s measured\n\n`,
    );
    const steps = provisioning.steps;
    process.stdout.write(
      `${
        provisioning.route === 'mosquitto'
          ? `Provisioning through the service on Mosquitto with dynamic security (POST /api/v1/admin/cars, ${provisioningConcurrency} at a time)`
          : "Provisioning through the service on its embedded broker (POST /api/v1/admin/cars, 8 at a time), then Mosquitto's dynamic-security file written in one go (BENCH_FLEET_PROVISION=file: Mosquitto's own time is NOT in these figures)"
      }, ${result.provisionedNow ? 'measured in this run' : 'kept from an earlier run'}: ` +
        `${provisioning.date.slice(0, 10)}, Node ${provisioning.node}, ${provisioning.cores} cores, load ${provisioning.loadBefore} before, ${provisioning.loadAfter} after\n\n`,
    );
    /** Seconds per 250 cars over the step that ends at `index`. */
    const per = (index: number) => {
      const step = steps[index];
      const before = index > 0 ? steps[index - 1] : { cars: 0, seconds: 0 };
      return step && before
        ? (step.seconds - before.seconds) / ((step.cars - before.cars) / 250)
        : Number.NaN;
    };
    printTable(
      ['cars provisioned', 'seconds', 's per 250 cars in the step to it'],
      milestoneSeconds(provisioning).map((milestone) => [
        milestone.cars.toLocaleString('en'),
        figure(milestone.seconds, 1),
        figure(per(steps.findIndex((step) => step.cars === milestone.cars)), 1),
      ]),
      1,
    );
    const last = steps.at(-1);
    if (last) {
      // A fleet smaller than a step has no per-step pace worth the name.
      const firstStep =
        steps.length > 1
          ? `the first step (${steps[0]?.cars} cars) at ${figure(per(0), 1)} s per 250 cars; `
          : '';
      process.stdout.write(
        `${firstStep}all ${last.cars} cars (probe cars included): ${figure(last.seconds, 1)} s\n\n`,
      );
    }
    printTable(
      [
        'replicas',
        'start s',
        'connected s',
        'online s',
        'sent/s',
        'bare/s',
        'stored/s',
        'stored/bare',
        'QoS 1 sent',
        'lost',
        'delay p50 ms',
        'p99 ms',
        'cmd bare p99',
        'service p99',
        'goal',
        'svc peak MiB',
        'svc CPU %',
        'svc CPU % connecting',
        'broker MiB',
        'broker CPU %',
        'Postgres CPU %',
        'fleet CPU %',
        'load before → after',
      ],
      result.runs.map((row) => [
        String(row.replicas),
        figure(row.serviceStartS, 1),
        figure(row.connectedS, 1),
        `${figure(row.onlineS, 1)}${row.neverOnline > 0 ? ` (${row.neverOnline} never)` : ''}`,
        figure(row.sentPerS),
        figure(row.barePerS),
        figure(row.storedPerS),
        `${figure(row.storedPerS / row.barePerS, 2)}×`,
        String(row.qos1Sent),
        String(lost(row)),
        figure(row.delayP50),
        `${figure(row.delayP99)}${row.unseen > 0 ? ` (+${row.unseen} unseen)` : ''}`,
        figure(row.commands.bare.p99),
        figure(row.commands.service.p99),
        figure(commandGoalMs(row)),
        row.servicePeakRssMib.map((value) => figure(value)).join(' / '),
        row.serviceCpuPercent.map((value) => figure(value)).join(' / '),
        row.serviceCpuPercentConnecting.map((value) => figure(value)).join(' / '),
        `${figure(row.brokerRssMib)} (${figure(row.brokerPeakRssMib)})`,
        figure(row.brokerCpuPercent),
        figure(row.databaseCpuPercent),
        figure(row.fleetCpuPercent),
        `${row.loadBefore} → ${row.loadAfter}`,
      ]),
      1,
    );
    process.stdout.write(
      'start: until every service process listened (its start syncs the broker credentials). connected / online:\n' +
        "from the first car's connection until every car had its CONNACK / showed `online` in GET /api/v1/admin/cars\n" +
        '(every page, asked again each second). sent/s: what the cars got to the broker; bare/s: status + telemetry a\n' +
        'bare mqtt.js subscriber received; stored/s: status + telemetry the bridges stored (summed over replicas).\n' +
        'lost: QoS 1 status and presence acknowledged by the broker and never stored, plus cars without a status report,\n' +
        "after the drain. delay: a probe car's status to GET …/status showing it. cmd: command round trips to " +
        `${settings.commandCars} random cars (bare mqtt.js / through the service), goal 2 × bare p99 + 50 ms. svc peak: each\n` +
        "service process's VmHWM; CPU: share of one core over the window (and over the connections). broker: Mosquitto's\n" +
        'RSS (peak). Postgres: every postgres process on the machine. fleet: the car processes.\n\n',
    );
    for (const row of result.runs) {
      const met = {
        online: row.neverOnline === 0,
        delay: row.delayP99 <= goal.delayP99Ms && row.unseen === 0,
        lost: lost(row) === 0,
        rss: Math.max(...row.servicePeakRssMib) <= goal.rssMib,
        commands:
          row.commands.service.p99 <= commandGoalMs(row) && row.commands.service.failures.length === 0,
      };
      const all = Object.values(met).every(Boolean);
      process.stdout.write(
        `${row.replicas} replica(s): goal ${all ? 'met' : 'NOT met'}: ${settings.cars} cars held ${met.online ? 'yes' : 'NO'}, ` +
          `p99 publish → visible ${figure(row.delayP99)} ms (goal ≤ ${goal.delayP99Ms}), ${lost(row)} lost (goal 0), ` +
          `service peak ${figure(Math.max(...row.servicePeakRssMib))} MiB (goal ≤ ${goal.rssMib}), ` +
          `commands p99 ${figure(row.commands.service.p99)} ms (goal ≤ ${figure(commandGoalMs(row))}, ${row.commands.service.failures.length} failed)\n`,
      );
      const steps = row.commands.steps;
      process.stdout.write(
        `  a command through the service, p50 / p99 ms: POST answered ${figure(row.commands.service.answeredP50)} / ${figure(row.commands.service.answeredP99)}, ` +
          `made → sent ${steps ? steps.madeToSent.map((ms) => figure(ms)).join(' / ') : '?'}, ` +
          `sent → completed stored ${steps ? steps.sentToCompleted.map((ms) => figure(ms)).join(' / ') : '?'}\n`,
      );
      if (row.carWarnings > 0)
        process.stdout.write(
          `  the cars warned ${row.carWarnings} times, first: ${row.firstWarnings.join(' | ')}\n`,
        );
    }
    for (const line of result.skipped) process.stdout.write(`skipped: ${line}\n`);
  }
}

function provisioningRoute(): ProvisioningRoute {
  const route = process.env.BENCH_FLEET_PROVISION?.trim() || 'mosquitto';
  if (route !== 'mosquitto' && route !== 'file')
    throw new Error(`BENCH_FLEET_PROVISION is \`mosquitto\` or \`file\`, not "${route}"`);
  return route;
}

function settings(): Settings {
  // `0`: provision (or check) the kept fleet and measure nothing else.
  const replicas = (process.env.BENCH_REPLICAS?.trim() || '1,2').split(',').flatMap((text) => {
    const count = Number(text.trim());
    if (!Number.isSafeInteger(count) || count < 0)
      throw new Error(`BENCH_REPLICAS lists counts like 1,2 (or 0), not "${text}"`);
    return count === 0 ? [] : [count];
  });
  return {
    cars: positiveInteger('BENCH_CARS', 10_000, 50),
    probes: positiveInteger('BENCH_PROBES', 4, 1),
    processes: positiveInteger('BENCH_FLEET_PROCESSES', 4, 2),
    connectSpreadS: positiveInteger('BENCH_CONNECT_SPREAD', 30, 2),
    onlineWaitS: positiveInteger('BENCH_ONLINE_WAIT', 600, 60),
    telemetryEveryMs: positiveInteger('BENCH_TELEMETRY_MS', 5000, 1000),
    statusEveryMs: positiveInteger('BENCH_STATUS_MS', 60_000, 2000),
    warmup: positiveInteger('BENCH_WARMUP', 10, 1),
    duration: positiveInteger('BENCH_DURATION', 60, 3),
    drain: positiveInteger('BENCH_DRAIN', 120, 30),
    commandCars: positiveInteger('BENCH_COMMAND_CARS', 100, 5),
    rounds: positiveInteger('BENCH_ROUNDS', 3, 1),
    replicas,
    reprovision: process.env.BENCH_FLEET_REPROVISION === '1',
    provisioningRoute: provisioningRoute(),
    ...storeAndProfileSettings(),
  };
}

await runBench({
  name: 'fleet',
  children: { serve, cars: startCars, count: startCounter, probe: startProbes, measure: startMeasurer },
  settings,
  run,
  report,
  // Mosquitto with Postgres, as a fleet runs; PGlite (one replica) only when there is no Postgres.
  byDefault: ({ broker, store }) =>
    broker === 'mosquitto' && (store === 'postgres' || !storeAndProfileSettings().databaseUrl),
});
