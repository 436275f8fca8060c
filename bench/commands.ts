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
import { provisionCars, startSimulator } from '@svc/car-simulator';
import { type RunningChild, spawnChild } from './support/children.ts';
import {
  type MeasureOrder,
  measureCommandRounds,
  type PathFigures,
  type RoundOrder,
  type RoundResult,
  startMeasurer,
} from './support/command-rounds.ts';
import {
  type Cleanup,
  type Configuration,
  callJson,
  prepareConfiguration,
  privilegedSignIn,
  runBench,
  type ServiceReady,
  signInAdmin,
  startService,
  storeAndProfileSettings,
} from './support/service.ts';
import { pause, positiveInteger } from './support/settings.ts';
import { printTable } from './table.ts';

/** Parent → service child. */
interface ServeOrder {
  env: Record<string, string>;
}

/** The service as main.ts starts it; it has nothing to count. */
async function serve({ env }: ServeOrder): Promise<RunningChild<ServiceReady, unknown, null>> {
  const service = await startService(env);
  return { ready: service.ready, answer: async () => null, stop: () => service.stop() };
}

interface Settings {
  cars: number;
  rounds: number;
  spreadMs: number;
  telemetryEveryMs: number;
  cpuProfDir: string | undefined;
  databaseUrl: string | undefined;
}

interface Measurement extends Configuration {
  bare: PathFigures;
  service: PathFigures;
  /** The longest the service's bridge took, after a bare round ended, to get through its acks. */
  catchUpMs: number;
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

  const rounds = await measureCommandRounds({
    measurer,
    metricsUrls: [service.ready.metricsUrl],
    rounds: settings.rounds,
    cars: settings.cars,
    label,
  });
  if (warnings.length > 0) {
    process.stderr.write(`${label}: the cars warned ${warnings.length} times, first: ${warnings[0]}`);
  }
  return { broker, store, ...rounds };
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
