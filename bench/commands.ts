// `npm run bench:commands`: how long a command takes from `POST /api/v1/cars/{id}/commands` to its
// `completed` state for a fleet of simulated cars, against a bare mqtt.js publish → ack round trip
// to the same cars in the same run.
/*
 * Process layout: this process runs the fleet (the car simulator's 100 cars, which answer every
 * command `accepted`, report their status when the doors change, then `completed`); the service
 * runs in a child process of its own (this file in `serve` mode: createApp as main.ts would, on
 * 127.0.0.1), and so does the measurer (`measure` mode), which times both round trips, one path at
 * a time, so that the two share its event loop and never each other's load. Each configuration
 * gets a fresh service and database: the embedded broker (aedes, inside the service) or a
 * Mosquitto this bench starts (dynamic security, as the tests start it); PGlite in a temporary
 * DATA_DIR, or, when DATABASE_URL is set, a database of its own on that Postgres server.
 *
 * A round sends one command to each car, the cars' sends spread evenly over BENCH_SPREAD_MS (by
 * default 100 commands a second), and waits for all of them. Rounds alternate between the paths
 * (bare then service, service then bare, …, so that neither gets the quieter half of the run), and
 * the command alternates between `doors.lock` and `doors.unlock` from round to round, so that each
 * command changes the doors and every car reports its status before `completed` on both paths.
 * The first two rounds (one a path) warm up and are not counted.
 *
 * - Bare: the measurer, signed in with a credential allowed to publish every car's `cmd` (the
 *   service's own on the embedded broker, the Mosquitto admin, who holds the service's role, on
 *   Mosquitto), publishes a command as the contract has it (QoS 1) and waits for the car's
 *   `completed` on `cmd/ack`. On the embedded broker that path runs through the service's process
 *   too (aedes shares its event loop), so there the baseline carries the service's load.
 * - Service: the measurer POSTs the command with an admin's token (202, `command_id`), waits for
 *   the car's `completed` on `cmd/ack` as above, and after the round reads the command with
 *   `GET …/commands/{id}` (again every 50 ms until it is `completed`); the round trip ends at its
 *   `updated_at`, which the service writes as it moves the command to `completed` (from its clock,
 *   this machine's wall clock, as the measurer's start is: millisecond resolution). Why not poll
 *   during the round, as a client would: for up to 100 commands at once, every few ms, that is
 *   thousands of requests a second, load of the bench's own making. A first version polled every
 *   5 ms once the car said `completed`, and while the service was behind it asked 15 to 40 times a
 *   command, each a request and two statements, more than the command's own work. `updated_at` is
 *   taken as the bridge handles the car's acknowledgement and is written by that one statement, on
 *   the bridge's own connection: what it leaves out is that statement's own time (about a
 *   millisecond), not any wait before it. GETs per command are reported (1.0: none asked twice).
 * - Between rounds: the service's bridge sees the bare path's acknowledgements too (two a
 *   command, each dropped as of a command it never sent: one statement and a log line), and may
 *   still be at them when a bare round ends; the next round starts once
 *   `svc_mqtt_dropped_total{reason="unknown_command"}` says it is through (the longest wait is
 *   reported as the bare catch-up), so that a service round does not pay for the bare one.
 *
 * Goal (issue 13): the service's p99 ≤ 2 × the bare p99 + 50 ms.
 *
 * Everything shares one machine: the fleet, the measurer, the service, the broker and Postgres.
 * Compare the two paths within one run, not figures across runs.
 *
 * Settings (environment): BENCH_CARS (100), BENCH_ROUNDS measured rounds per path (10),
 * BENCH_SPREAD_MS over which a round's commands start (1000), BENCH_TELEMETRY_MS each car's
 * telemetry period (1000; status every 10 s, and on each change of the doors), BENCH_ONLY (e.g.
 * `embedded/pglite,mosquitto/postgres`) to run only some configurations, BENCH_CPU_PROF=<folder>
 * for a V8 CPU profile of each service process (see bench/api.ts).
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { provisionCars, startSimulator } from '@svc/car-simulator';
import mqtt, { type MqttClient } from 'mqtt';
import {
  type CarCommand,
  type CarCommandAck,
  carTopic,
  carTopicFilter,
  carTopicQos,
} from '../generated/mqtt.ts';
import { sample } from '../server/test/support/metrics.ts';
import { errorText, type RunningChild, spawnChild } from './support/children.ts';
import {
  type Cleanup,
  type Configuration,
  callJson,
  prepareConfiguration,
  privilegedSignIn,
  runBench,
  type ServiceReady,
  type SignIn,
  signInAdmin,
  startService,
  storeAndProfileSettings,
} from './support/service.ts';
import { pause, percentile, positiveInteger } from './support/settings.ts';
import { printTable } from './table.ts';

type Path = 'bare' | 'service';
type DoorsCommand = 'doors.lock' | 'doors.unlock';

/** How long one command may take before it counts as lost. */
const giveUpMs = 30_000;
/** How often the measurer asks again for a command the service has not moved to `completed` yet. */
const pollMs = 50;

/** Parent → service child. */
interface ServeOrder {
  env: Record<string, string>;
}

/** Parent → measurer. */
interface MeasureOrder {
  apiUrl: string;
  token: string;
  signIn: SignIn;
  deviceIds: string[];
  spreadMs: number;
}

/** Parent → measurer: one round. */
interface RoundOrder {
  path: Path;
  name: DoorsCommand;
}

/** A command through the service that the car completed: where to read it, and when it was POSTed. */
interface ServiceTrip {
  url: string;
  /** Wall-clock ms. */
  startedAt: number;
}

interface RoundResult {
  /** Round trips, in ms, of the commands that completed. */
  delaysMs: number[];
  /** Commands that did not complete: why, one line each. */
  failures: string[];
  /** GET …/commands/{id} asked, in all. */
  reads: number;
}

/** The service as main.ts starts it; it has nothing to count. */
async function serve({ env }: ServeOrder): Promise<RunningChild<ServiceReady, unknown, null>> {
  const service = await startService(env);
  return { ready: service.ready, answer: async () => null, stop: () => service.stop() };
}

/** The car's `completed` (or another final outcome) of each command, as the broker delivers it. */
function watchAcks(client: MqttClient) {
  const seen = new Map<string, CarCommandAck['outcome']>();
  const waiting = new Map<string, (outcome: CarCommandAck['outcome']) => void>();
  client.on('message', (_topic, payload) => {
    let ack: CarCommandAck;
    try {
      ack = JSON.parse(payload.toString('utf8'));
    } catch {
      return;
    }
    if (ack.outcome === 'accepted' || typeof ack.command_id !== 'string') return;
    const waiter = waiting.get(ack.command_id);
    if (waiter) {
      waiting.delete(ack.command_id);
      waiter(ack.outcome);
    } else {
      // Before the POST answered with the command's id (the car can be that quick).
      seen.set(ack.command_id, ack.outcome);
    }
  });
  return {
    /** The command's final outcome from the car, or `timeout`. */
    final(commandId: string, deadline: number): Promise<CarCommandAck['outcome'] | 'timeout'> {
      const already = seen.get(commandId);
      if (already) {
        seen.delete(commandId);
        return Promise.resolve(already);
      }
      return new Promise((resolve) => {
        const timer = setTimeout(
          () => {
            waiting.delete(commandId);
            resolve('timeout');
          },
          Math.max(0, deadline - performance.now()),
        );
        waiting.set(commandId, (outcome) => {
          clearTimeout(timer);
          resolve(outcome);
        });
      });
    },
  };
}

/** Times rounds of commands, on the bare path or through the service, as the parent orders. */
async function startMeasurer(order: MeasureOrder): Promise<RunningChild<true, RoundOrder, RoundResult>> {
  const client = await mqtt.connectAsync(order.signIn.url, {
    username: order.signIn.username,
    password: order.signIn.password,
    clientId: order.signIn.clientId,
    protocolVersion: order.signIn.protocolVersion,
    clean: true,
    reconnectPeriod: 0,
  });
  const acks = watchAcks(client);
  const [granted] = await client.subscribeAsync(carTopicFilter('cmd/ack'), { qos: carTopicQos['cmd/ack'] });
  if (!granted || granted.qos >= 0x80) throw new Error('the broker refused the subscription to cmd/ack');
  /** GETs asked in the round under way. */
  let reads = 0;

  /** Bare: the command published straight to the car, until its `completed`. */
  async function bare(deviceId: string, name: DoorsCommand): Promise<number | string> {
    const colon = deviceId.indexOf(':');
    const brand = deviceId.slice(0, colon) as CarCommand['brand'];
    const issued = new Date();
    const command: CarCommand = {
      command_id: randomUUID(),
      device_id: deviceId,
      brand,
      name,
      args: {},
      issued_at: issued.toISOString(),
      expires_at: new Date(issued.getTime() + 300_000).toISOString(),
    };
    const started = performance.now();
    await client.publishAsync(carTopic(brand, deviceId.slice(colon + 1), 'cmd'), JSON.stringify(command), {
      qos: carTopicQos.cmd,
    });
    const outcome = await acks.final(command.command_id, started + giveUpMs);
    return outcome === 'completed' ? performance.now() - started : `bare ${name}: ${outcome}`;
  }

  /**
   * Through the service: POST, and wait for the car's `completed`; when the service moved the
   * command to `completed` is read after the round (`readCompletion`).
   */
  async function service(deviceId: string, name: DoorsCommand): Promise<ServiceTrip | string> {
    const commands = `${order.apiUrl}/api/v1/cars/${encodeURIComponent(deviceId)}/commands`;
    // Wall-clock time, the service's clock: `updated_at` is on it (one machine, one clock).
    const startedAt = Date.now();
    const started = performance.now();
    const sent = await callJson(commands, { method: 'POST', token: order.token, body: { name } });
    const commandId = sent.body.command_id;
    if (sent.status !== 202 || typeof commandId !== 'string') {
      return `POST ${name} answered ${sent.status}: ${sent.text}`;
    }
    const outcome = await acks.final(commandId, started + giveUpMs);
    if (outcome !== 'completed') return `service ${name}: the car said ${outcome}`;
    return { url: `${commands}/${commandId}`, startedAt };
  }

  /** POST to the command's `updated_at` as `completed`, in ms, read once the service says so. */
  async function readCompletion(trip: ServiceTrip): Promise<number | string> {
    const deadline = performance.now() + giveUpMs;
    for (;;) {
      const read = await callJson(trip.url, { token: order.token });
      reads += 1;
      if (read.body.state === 'completed') return Date.parse(String(read.body.updated_at)) - trip.startedAt;
      if (read.status !== 200 || performance.now() > deadline) {
        return `GET ${trip.url} answered ${read.status}: ${read.text}`;
      }
      await pause(pollMs);
    }
  }

  return {
    ready: true,
    async answer({ path, name }: RoundOrder): Promise<RoundResult> {
      reads = 0;
      const result: RoundResult = { delaysMs: [], failures: [], reads: 0 };
      const trips: ServiceTrip[] = [];
      const step = order.spreadMs / order.deviceIds.length;
      const roundStart = performance.now();
      await Promise.all(
        order.deviceIds.map(async (deviceId, index) => {
          await pause(roundStart + index * step - performance.now());
          const outcome = await (path === 'bare' ? bare : service)(deviceId, name).catch(errorText);
          if (typeof outcome === 'number') result.delaysMs.push(outcome);
          else if (typeof outcome === 'string') result.failures.push(outcome);
          else trips.push(outcome);
        }),
      );
      // Read after the round, so that asking does not load the service while it works.
      for (const trip of trips) {
        const delay = await readCompletion(trip).catch(errorText);
        if (typeof delay === 'number') result.delaysMs.push(delay);
        else result.failures.push(delay);
      }
      return { ...result, reads };
    },
    stop: () => client.endAsync(),
  };
}

interface Settings {
  cars: number;
  rounds: number;
  spreadMs: number;
  telemetryEveryMs: number;
  cpuProfDir: string | undefined;
  databaseUrl: string | undefined;
}

interface PathFigures {
  p50: number;
  p99: number;
  samples: number;
  failures: string[];
  /** GETs per command. */
  readsPerCommand: number;
}

interface Measurement extends Configuration {
  bare: PathFigures;
  service: PathFigures;
  /** The longest the service's bridge took, after a bare round ended, to get through its acks. */
  catchUpMs: number;
}

function figures(results: RoundResult[]): PathFigures {
  const delays = results.flatMap((result) => result.delaysMs).sort((a, b) => a - b);
  return {
    p50: percentile(delays, 0.5),
    p99: percentile(delays, 0.99),
    samples: delays.length,
    failures: results.flatMap((result) => result.failures),
    readsPerCommand: results.reduce((sum, result) => sum + result.reads, 0) / Math.max(1, delays.length),
  };
}

/** One configuration, start to end; what it starts is undone at the end (its undoing into `cleanups`). */
async function run(
  { broker, store }: Configuration,
  settings: Settings,
  cleanups: Cleanup[],
): Promise<Measurement> {
  const label = `${broker}-${store}`;
  const { env, mosquitto } = await prepareConfiguration(
    { broker, store },
    { bench: 'commands', databaseUrl: settings.databaseUrl },
    cleanups,
  );
  const service = await spawnChild<ServeOrder, ServiceReady, unknown, null>({
    script: import.meta.url,
    mode: 'serve',
    label,
    order: { env },
    cpuProfDir: settings.cpuProfDir,
  });
  cleanups.unshift(() => service.stop());
  const { url: apiUrl, mqttUrl } = service.ready;
  const token = await signInAdmin(service.ready);
  process.stderr.write(`${label}: provisioning ${settings.cars} cars\n`);
  const cars = await provisionCars({ apiUrl, token, count: settings.cars, brand: 'brand_a' });

  const warnings: string[] = [];
  const fleet = await startSimulator({
    mqttUrl,
    cars,
    telemetryEveryMs: settings.telemetryEveryMs,
    output: { write: () => true },
    warnings: { write: (text: string) => warnings.push(text) },
  });
  cleanups.unshift(async () => {
    await fleet.stop();
  });
  const measurer = await spawnChild<MeasureOrder, true, RoundOrder, RoundResult>({
    script: import.meta.url,
    mode: 'measure',
    label,
    order: {
      apiUrl,
      token,
      signIn: privilegedSignIn(mqttUrl, service.ready, mosquitto, 'bench-commands'),
      deviceIds: cars.map((car) => car.deviceId),
      spreadMs: settings.spreadMs,
    },
  });
  cleanups.unshift(() => measurer.stop());
  // Every car online, so that the service publishes at once rather than when the car comes.
  for (const car of cars) {
    const route = `${apiUrl}/api/v1/cars/${encodeURIComponent(car.deviceId)}/status`;
    while ((await callJson(route, { token })).body.online !== true) await pause(50);
  }

  const results: Record<Path, RoundResult[]> = { bare: [], service: [] };
  // The service's bridge sees the bare path's acknowledgements too (two a command, each dropped as
  // of a command it never sent), and may still be at them when the round ends: a service round
  // starts once it is through, so that it does not pay for the bare round's traffic.
  let bareAcks = 0;
  const bareAcksHandled = async () =>
    sample(await (await fetch(service.ready.metricsUrl)).text(), 'svc_mqtt_dropped_total', {
      reason: 'unknown_command',
    });
  const catchingUpMs: number[] = [];
  // A round on each path, then another the other way round; the first pair warms up.
  const pairs = settings.rounds + 1;
  process.stderr.write(
    `${label}: ${pairs} rounds a path of ${settings.cars} commands, the first to warm up\n`,
  );
  let round = 0;
  for (let pair = 0; pair < pairs; pair++) {
    const order: Path[] = pair % 2 === 0 ? ['bare', 'service'] : ['service', 'bare'];
    for (const path of order) {
      const name: DoorsCommand = round++ % 2 === 0 ? 'doors.lock' : 'doors.unlock';
      const result = await measurer.ask({ path, name });
      if (pair > 0) results[path].push(result);
      if (path === 'bare') {
        bareAcks += 2 * result.delaysMs.length;
        const roundEnd = performance.now();
        while ((await bareAcksHandled()) < bareAcks) {
          if (performance.now() - roundEnd > giveUpMs)
            throw new Error(
              `${label}: the bridge handled ${await bareAcksHandled()} of ${bareAcks} bare acknowledgements`,
            );
          await pause(20);
        }
        if (pair > 0) catchingUpMs.push(performance.now() - roundEnd);
      }
    }
  }
  if (warnings.length > 0) {
    process.stderr.write(`${label}: the cars warned ${warnings.length} times, first: ${warnings[0]}`);
  }
  return {
    broker,
    store,
    bare: figures(results.bare),
    service: figures(results.service),
    catchUpMs: Math.max(...catchingUpMs),
  };
}

/** The goal of issue 13, in ms: the service's p99 may be at most this. */
const goalMs = (row: Measurement) => 2 * row.bare.p99 + 50;

function report(rows: Measurement[], settings: Settings): void {
  process.stdout.write(
    `\nCommand round trips on Node ${process.versions.node}: ${settings.cars} simulated cars, ` +
      `${settings.rounds} rounds a path of one command a car, started over ${settings.spreadMs} ms; ` +
      `telemetry every ${settings.telemetryEveryMs} ms a car\n\n`,
  );
  printTable(
    [
      'broker',
      'store',
      'bare p50 ms',
      'p99 ms',
      'service p50 ms',
      'p99 ms',
      'goal ms',
      'GETs/command',
      'bare catch-up ms',
      'samples',
      'lost',
    ],
    rows.map((row) => [
      row.broker,
      row.store,
      row.bare.p50.toFixed(1),
      row.bare.p99.toFixed(1),
      row.service.p50.toFixed(1),
      row.service.p99.toFixed(1),
      goalMs(row).toFixed(1),
      row.service.readsPerCommand.toFixed(1),
      row.catchUpMs.toFixed(0),
      `${row.bare.samples}/${row.service.samples}`,
      `${row.bare.failures.length}/${row.service.failures.length}`,
    ]),
    2,
  );
  process.stdout.write(
    'bare: mqtt.js publish of the command to the car → its `completed` on cmd/ack. service: POST …/commands →\n' +
      "the command's `updated_at`, written as the service moved it to `completed` (read after each round).\n" +
      'goal: 2 × bare p99 + 50 ms. GETs/command: those reads. samples and lost: bare/service.\n\n',
  );
  for (const row of rows) {
    const met = row.service.p99 <= goalMs(row) && row.service.failures.length === 0;
    process.stdout.write(
      `${row.broker}/${row.store}: goal ${met ? 'met' : 'NOT met'}: service p99 ${row.service.p99.toFixed(1)} ms ` +
        `(goal ≤ ${goalMs(row).toFixed(1)} ms), ${row.service.failures.length} lost\n`,
    );
    for (const failure of [...row.bare.failures, ...row.service.failures].slice(0, 3)) {
      process.stdout.write(`  ${failure}\n`);
    }
  }
}

function settings(): Settings {
  return {
    cars: positiveInteger('BENCH_CARS', 100, 5),
    rounds: positiveInteger('BENCH_ROUNDS', 10, 1),
    spreadMs: positiveInteger('BENCH_SPREAD_MS', 1000, 100),
    telemetryEveryMs: positiveInteger('BENCH_TELEMETRY_MS', 1000),
    ...storeAndProfileSettings(),
  };
}

await runBench({ name: 'commands', children: { serve, measure: startMeasurer }, settings, run, report });
