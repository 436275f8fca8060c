/** A fleet of simulated cars on one broker: `startSimulator` connects them all, `stop()` takes them off. */
import type { CarTopicSuffix } from '../../generated/mqtt.ts';
import { type CarCredential, type InstalledApp, SimulatedCar } from './car.ts';
import { RefusedCredentialError, SimulatorError } from './errors.ts';
import { Route, type Waypoint } from './route.ts';

export interface TextSink {
  write(text: string): unknown;
}

export interface SimulatorOptions {
  /** Default `mqtt://127.0.0.1:1883`, the service's embedded broker. */
  mqttUrl?: string;
  /** The certificate authorities (PEM) an `mqtts://` broker must be signed by; default the system's. */
  ca?: Buffer;
  cars: readonly CarCredential[];
  /** Default 10 s. */
  statusEveryMs?: number;
  /** Default 1 s. */
  telemetryEveryMs?: number;
  /** The host runtime version each car reports; default 2.14.0. */
  hostVersion?: string;
  /** What each car has installed when it starts; default nothing. */
  installedApps?: readonly InstalledApp[];
  /** The loop the cars drive, spread evenly along it; default a ring around central Munich. */
  route?: readonly Waypoint[];
  /** Where what the cars show goes (pairing codes); default stdout. */
  output?: TextSink;
  /** Where problems after start go (lost connections); default stderr. */
  warnings?: TextSink;
  clock?: () => Date;
  /** How many cars connect at the same time; default 20, so that a large fleet does not flood the broker's accept queue. */
  connectConcurrency?: number;
  /**
   * Spreads the connections evenly over this long (car i starts connecting at i/n of it), as a
   * fleet coming back after a broker restart would, rather than all as fast as
   * `connectConcurrency` lets them; default 0.
   */
  connectSpreadMs?: number;
  /** Default 10 s. */
  connectTimeoutMs?: number;
  /** Default 1 s. */
  reconnectPeriodMs?: number;
  /** Told of each message a car got to the broker (QoS 1: once acknowledged), e.g. to count them. */
  sent?(deviceId: string, suffix: CarTopicSuffix): void;
  /**
   * Given, a car whose password (or id) the broker refuses at the start is told here and left
   * out, and the others drive, as a car refused while running stops alone; the start fails only
   * when no car could connect. Without it one refused car fails the start: a test or a benchmark
   * wants every car it named.
   */
  leftOut?(problem: RefusedCredentialError): void;
}

export interface Simulator {
  readonly cars: readonly SimulatedCar[];
  /** Every car says `offline` and disconnects; how many were online (not those stopped or reconnecting already). */
  stop(): Promise<number>;
  /** Settles once the broker has refused every car's password on a reconnection (all stopped). */
  readonly allRefused: Promise<void>;
}

export const defaultMqttUrl = 'mqtt://127.0.0.1:1883';

/**
 * Connects every car; when one cannot, disconnects those that did and throws its SimulatorError
 * (with `leftOut`, a refused password leaves that car out instead).
 */
export async function startSimulator(options: SimulatorOptions): Promise<Simulator> {
  const route = new Route(options.route);
  const output = options.output ?? process.stdout;
  const warnings = options.warnings ?? process.stderr;
  const total = options.cars.length;
  const started: SimulatedCar[] = new Array(total);
  let failure: unknown;
  let next = 0;
  let refusedCars = 0;
  let leftOutCars = 0;
  /** How many cars the start connected; a refusal counts against these once it is known. */
  let running: number | undefined;
  let everyCarRefused = () => {};
  const allRefused = new Promise<void>((resolve) => {
    everyCarRefused = resolve;
  });

  const spreadMs = options.connectSpreadMs ?? 0;
  const spreadFrom = performance.now();

  async function startNext(): Promise<void> {
    while (failure === undefined && next < total) {
      const index = next++;
      const credential = options.cars[index] as CarCredential;
      const due = spreadFrom + (spreadMs * index) / total;
      if (due > performance.now())
        await new Promise((resolve) => setTimeout(resolve, due - performance.now()));
      try {
        started[index] = await SimulatedCar.start({
          mqttUrl: options.mqttUrl ?? defaultMqttUrl,
          ca: options.ca,
          credential,
          statusEveryMs: options.statusEveryMs ?? 10_000,
          telemetryEveryMs: options.telemetryEveryMs ?? 1000,
          route,
          startKm: (route.lengthKm * index) / Math.max(1, total),
          // 30 to 54 km/h: city traffic, each car a little different.
          cruiseKmh: 30 + ((index * 7) % 25),
          hostVersion: options.hostVersion ?? '2.14.0',
          installedApps: options.installedApps ?? [],
          show: (line) => output.write(`${line}\n`),
          warn: (line) => warnings.write(`${line}\n`),
          clock: options.clock ?? (() => new Date()),
          connectTimeoutMs: options.connectTimeoutMs ?? 10_000,
          reconnectPeriodMs: options.reconnectPeriodMs ?? 1000,
          refused: () => {
            refusedCars += 1;
            if (refusedCars === running) everyCarRefused();
          },
          sent: options.sent && ((suffix) => options.sent?.(credential.deviceId, suffix)),
        });
      } catch (error) {
        if (options.leftOut && error instanceof RefusedCredentialError) {
          leftOutCars += 1;
          options.leftOut(error);
        } else {
          failure ??= error;
        }
      }
    }
  }

  const lanes = Math.max(1, Math.min(options.connectConcurrency ?? 20, total));
  await Promise.all(Array.from({ length: lanes }, startNext));
  const cars = started.filter((car): car is SimulatedCar => car !== undefined);
  const stop = async () => {
    const online = await Promise.all(cars.map((car) => car.stop()));
    return online.filter(Boolean).length;
  };
  if (failure !== undefined) {
    await stop();
    throw failure;
  }
  if (cars.length === 0 && leftOutCars > 0) {
    throw new SimulatorError(
      `the broker at ${options.mqttUrl ?? defaultMqttUrl} refused every car (${leftOutCars}): none could start`,
    );
  }
  running = cars.length;
  // Cars refused on a reconnection while the others were still starting.
  if (running > 0 && refusedCars === running) everyCarRefused();
  return { cars, stop, allRefused };
}
