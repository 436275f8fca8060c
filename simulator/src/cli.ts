import { readFileSync } from 'node:fs';
/** `svc-car-sim`: flags → cars → a running fleet until Ctrl-C. Exit 0 when stopped, 1 when it failed, 2 on bad flags. */
import { parseArgs } from 'node:util';
import { type Brand, brands, isBrand, parseVersion } from '@svc/sdk';
import { checkBroker } from './broker-check.ts';
import type { CarCredential } from './car.ts';
import { createCredentialsFile, readCredentialsFile } from './credentials.ts';
import { formatDuration, parseDuration } from './duration.ts';
import { type RefusedCredentialError, SimulatorError } from './errors.ts';
import { provisionCars } from './provisioning.ts';
import { defaultMqttUrl, startSimulator, type TextSink } from './simulator.ts';

export interface CliContext {
  stdout: TextSink;
  stderr: TextSink;
  env: Readonly<Record<string, string | undefined>>;
  /** Aborted on Ctrl-C (SIGINT) or SIGTERM: the cars say offline and disconnect. */
  stop: AbortSignal;
}

const defaultApiUrl = 'http://127.0.0.1:8080';
const defaultStatusEvery = 10_000;
const defaultTelemetryEvery = 1000;
/** How long the broker (and then each car) may take to answer a connection. */
const connectTimeoutMs = 10_000;

export const usage = `svc-car-sim: simulated cars on the svc broker

Each car signs in with its credential (client id = user name = its device id) and a retained
"offline" last will, says "online", reports status and telemetry (driving a loop around Munich),
and answers the commands it receives. Ctrl-C: every car says "offline" and disconnects.

Usage:
  svc-car-sim --credentials FILE [--cars N] [options]
  svc-car-sim --cars N [--api-url URL] [--token TOKEN] [--save-credentials FILE] [options]

Cars:
  --credentials FILE       a JSON list, one entry per car, each one of:
                             {"device_id", "password"} (what --save-credentials writes)
                             {"car": {"device_id", …}, "mqtt": {"username", "password", …}}
                               (the answer of POST /api/v1/admin/cars, as it came)
                             {"username", "password"} (the answer of POST …/credential)
                           with --cars N, only the first N. A car the broker refuses is
                           left out, saying so, and the others drive (a rotated password:
                           put the new one in FILE)
  --cars N                 without --credentials: provision N new cars through the admin API
  --api-url URL            the service to provision them with (default $SVC_API_URL, else ${defaultApiUrl})
  --token TOKEN            an admin's access token (default $SVC_TOKEN, which ps does not show)
  --brand BRAND            the brand of the new cars: ${brands.join(', ')} (default brand_a)
  --save-credentials FILE  keep the new cars' passwords (shown once), for a later --credentials
                           run: a new file, mode 600, best outside the checkout

Apps:
  --app ID@VERSION         a mini-app every car starts with, e.g. com.example.hello-car@1.0.0
                           (repeatable); a car installs what the service sends it, and says so

Broker and rates:
  --mqtt-url URL           the broker: the MQTT line npm start printed (default $SVC_MQTT_URL, else ${defaultMqttUrl})
  --ca FILE                the CA certificate (PEM) an mqtts:// broker is signed by (default $SVC_MQTT_CA, else the system's)
  --status-every DURATION  status report period (default ${formatDuration(defaultStatusEvery)}), e.g. 500ms, 2s, 1m
  --telemetry-every DURATION
                           telemetry period (default ${formatDuration(defaultTelemetryEvery)})
  -h, --help               this help

Examples:
  SVC_TOKEN="$ADMIN_TOKEN" svc-car-sim --cars 5 --save-credentials ~/svc-cars.json
  svc-car-sim --credentials ~/svc-cars.json --telemetry-every 200ms --mqtt-url mqtt://127.0.0.1:1884
                           (the MQTT line of MQTT_PORT=1884 npm start, where a Mosquitto holds 1883)
`;

/** A mistake in the flags: the message, then a pointer to --help; exit 2. */
class UsageError extends Error {}

/** `--app com.example.hello-car@1.0.0`: an app the cars start with. */
function appFlag(text: string): { app_id: string; version: string } {
  const at = text.lastIndexOf('@');
  const appId = text.slice(0, at);
  const version = text.slice(at + 1);
  if (
    at <= 0 ||
    !/^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)+$/.test(appId) ||
    parseVersion(version) === undefined
  ) {
    throw new UsageError(
      `--app must be a mini-app id and a version, such as com.example.hello-car@1.0.0, not "${text}"`,
    );
  }
  return { app_id: appId, version };
}

const flags = {
  cars: { type: 'string' },
  credentials: { type: 'string' },
  'api-url': { type: 'string' },
  token: { type: 'string' },
  brand: { type: 'string' },
  'save-credentials': { type: 'string' },
  'mqtt-url': { type: 'string' },
  ca: { type: 'string' },
  'status-every': { type: 'string' },
  'telemetry-every': { type: 'string' },
  app: { type: 'string', multiple: true },
  help: { type: 'boolean', short: 'h' },
} as const;

type Flags = ReturnType<typeof parseArgs<{ options: typeof flags; strict: true }>>['values'];

function parseFlags(argv: readonly string[]): Flags {
  try {
    return parseArgs({ args: [...argv], options: flags, strict: true, allowPositionals: false }).values;
  } catch (error) {
    // Node's own wording suggests `--` tricks that mean nothing here: keep its first sentence.
    const message = (error as Error).message.split('. ')[0] ?? String(error);
    throw new UsageError(message.replace(/\.$/, ''));
  }
}

function count(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d+$/.test(text) || Number(text) < 1 || Number(text) > 100_000) {
    throw new UsageError(`--cars must be a whole number from 1 to 100000, not "${text}"`);
  }
  return Number(text);
}

function duration(text: string | undefined, flag: string, fallback: number): number {
  if (text === undefined) return fallback;
  const ms = parseDuration(text);
  if (ms === undefined)
    throw new UsageError(`${flag} must be a duration such as 200ms, 1s or 2m, not "${text}"`);
  return ms;
}

function mqttUrl(text: string | undefined): string {
  if (text === undefined) return defaultMqttUrl;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`--mqtt-url must be a URL such as ${defaultMqttUrl}, not "${text}"`);
  }
  if (!['mqtt:', 'mqtts:', 'tcp:', 'ssl:', 'ws:', 'wss:'].includes(url.protocol)) {
    throw new UsageError(`--mqtt-url must be an mqtt:// or mqtts:// URL, not "${text}"`);
  }
  return text;
}

function apiUrl(text: string, from: string): string {
  try {
    const url = new URL(text);
    if (url.protocol === 'http:' || url.protocol === 'https:') return text;
  } catch {}
  throw new UsageError(`${from} must be an http:// or https:// URL such as ${defaultApiUrl}, not "${text}"`);
}

/** Where the cars come from: a credentials file, or new cars the admin API provisions. */
type CarSource =
  | { kind: 'file'; path: string; credentials: CarCredential[] }
  | { kind: 'new'; apiUrl: string; token: string; count: number; brand: Brand; savePath: string | undefined };

/** Which cars, from the flags; reads a credentials file but provisions nothing yet. */
async function chooseCars(values: Flags, context: CliContext): Promise<CarSource> {
  const wanted = count(values.cars);
  if (values.credentials !== undefined) {
    for (const flag of ['api-url', 'token', 'brand', 'save-credentials'] as const) {
      if (values[flag] !== undefined)
        throw new UsageError(`--${flag} provisions new cars: it cannot go with --credentials`);
    }
    const credentials = await readCredentialsFile(values.credentials);
    if (wanted !== undefined && wanted > credentials.length) {
      throw new UsageError(`--cars ${wanted}, but ${values.credentials} holds ${credentials.length} car(s)`);
    }
    return {
      kind: 'file',
      path: values.credentials,
      credentials: credentials.slice(0, wanted ?? credentials.length),
    };
  }
  if (wanted === undefined) {
    throw new UsageError(
      'say which cars: --credentials FILE, or --cars N to provision N new ones (an admin token needed)',
    );
  }
  const token = values.token ?? context.env.SVC_TOKEN;
  if (!token) throw new UsageError("provisioning cars needs an admin's token: pass --token or set SVC_TOKEN");
  const brand = values.brand ?? 'brand_a';
  if (!isBrand(brand)) throw new UsageError(`--brand must be one of ${brands.join(', ')}, not "${brand}"`);
  const url =
    values['api-url'] !== undefined
      ? apiUrl(values['api-url'], '--api-url')
      : context.env.SVC_API_URL
        ? apiUrl(context.env.SVC_API_URL, 'SVC_API_URL')
        : defaultApiUrl;
  return { kind: 'new', apiUrl: url, token, count: wanted, brand, savePath: values['save-credentials'] };
}

/**
 * Provisions the new cars, once the broker has answered and the file for their passwords is
 * claimed: a failure after provisioning would orphan cars whose passwords no one has.
 */
async function provision(
  source: Extract<CarSource, { kind: 'new' }>,
  context: CliContext,
): Promise<CarCredential[]> {
  const file = source.savePath === undefined ? undefined : await createCredentialsFile(source.savePath);
  let credentials: CarCredential[];
  try {
    credentials = await provisionCars(source);
  } catch (error) {
    await file?.discard();
    throw error;
  }
  context.stderr.write(`provisioned ${credentials.length} car(s) of ${source.brand} at ${source.apiUrl}\n`);
  if (file) {
    await file.save(credentials);
    context.stderr.write(
      `saved their credentials to ${source.savePath} (it holds their passwords: readable by you only)\n`,
    );
  } else {
    // The passwords are shown once by the service: without them these cars cannot be run again.
    context.stderr.write(
      'their passwords are not kept: pass --save-credentials FILE to run them again later\n',
    );
  }
  return credentials;
}

/** One line on a car the broker refused at the start, saying how to get it back. */
function leftOutLine(problem: RefusedCredentialError, source: CarSource, broker: string): string {
  if (source.kind === 'new') {
    return `car ${problem.deviceId}: the broker at ${broker} refused the password the service at ${source.apiUrl} just gave it; it does not start: is --mqtt-url the MQTT address npm start printed for that service?`;
  }
  const path = `/api/v1/admin/cars/${encodeURIComponent(problem.deviceId)}/credential`;
  return `${problem.message}; it does not start: rotate its credential (POST ${path}) and put the new password in ${source.path}, or remove the car from ${source.path}`;
}

/** Why not one car started, every one of them refused (each said so above). */
function noCarStarted(source: CarSource, broker: string): string {
  if (source.kind === 'new') {
    const rerun = source.savePath === undefined ? '' : `, and run them with --credentials ${source.savePath}`;
    return `no car could start: the broker at ${broker} refused every car the service at ${source.apiUrl} provisioned: pass the MQTT address npm start printed for that service as --mqtt-url${rerun}`;
  }
  return `no car could start: the broker at ${broker} refused every car of ${source.path}: give them new passwords (above), or provision new cars with --cars N`;
}

/** The CA file's PEM, read now: a wrong path is the user's mistake, said before any car starts. */
function caFile(path: string | undefined, from: string): Buffer | undefined {
  if (path === undefined) return undefined;
  let pem: Buffer;
  try {
    pem = readFileSync(path);
  } catch (error) {
    throw new UsageError(
      `${from} names ${path}, which cannot be read (${(error as NodeJS.ErrnoException).code ?? error})`,
    );
  }
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) {
    throw new UsageError(
      `${from} names ${path}, which holds no PEM certificate (-----BEGIN CERTIFICATE-----)`,
    );
  }
  return pem;
}

async function run(argv: readonly string[], context: CliContext): Promise<void> {
  const values = parseFlags(argv);
  if (values.help) {
    context.stdout.write(usage);
    return;
  }
  const statusEveryMs = duration(values['status-every'], '--status-every', defaultStatusEvery);
  const telemetryEveryMs = duration(values['telemetry-every'], '--telemetry-every', defaultTelemetryEvery);
  const broker = mqttUrl(values['mqtt-url'] ?? (context.env.SVC_MQTT_URL || undefined));
  const ca = caFile(
    values.ca ?? (context.env.SVC_MQTT_CA || undefined),
    values.ca === undefined ? 'SVC_MQTT_CA' : '--ca',
  );
  const installedApps = (values.app ?? []).map(appFlag);
  const source = await chooseCars(values, context);
  const answer = await checkBroker(broker, connectTimeoutMs, ca);
  if (answer.anonymousAccepted) {
    context.stderr.write(
      `warning: the broker at ${broker} let in a client without a password, which the service's own broker never does: is it another broker (a system Mosquitto)? Use the MQTT address npm start printed\n`,
    );
  }
  const cars = source.kind === 'file' ? source.credentials : await provision(source, context);
  if (context.stop.aborted) return;

  let leftOut = 0;
  const simulator = await startSimulator({
    mqttUrl: broker,
    ca,
    cars,
    statusEveryMs,
    telemetryEveryMs,
    connectTimeoutMs,
    installedApps,
    output: context.stdout,
    warnings: context.stderr,
    leftOut: (problem) => {
      leftOut += 1;
      context.stderr.write(`${leftOutLine(problem, source, broker)}\n`);
    },
  }).catch((error: unknown) => {
    if (leftOut === cars.length) throw new SimulatorError(noCarStarted(source, broker));
    throw error;
  });
  const notStarted = leftOut === 0 ? '' : ` (${leftOut} refused, above)`;
  context.stderr.write(
    `${simulator.cars.length} car(s) online at ${broker}${notStarted}: status every ${formatDuration(statusEveryMs)}, telemetry every ${formatDuration(telemetryEveryMs)}; Ctrl-C to stop\n`,
  );
  for (const car of simulator.cars) context.stderr.write(`  ${car.deviceId}\n`);
  const ended = await Promise.race([
    new Promise<'stopped'>((resolve) => {
      if (context.stop.aborted) resolve('stopped');
      context.stop.addEventListener('abort', () => resolve('stopped'), { once: true });
    }),
    simulator.allRefused.then(() => 'refused' as const),
  ]);
  const online = await simulator.stop();
  if (ended === 'refused') {
    throw new SimulatorError(
      'the broker refused every car its password: give the new credentials (--credentials), or provision new cars',
    );
  }
  // The cars the broker dropped (rotated, decommissioned) said so when they stopped.
  context.stderr.write(`${online} car(s) offline\n`);
}

/** Runs the command; the exit code: 0 stopped, 1 the simulator failed, 2 bad flags. */
export async function runCli(argv: readonly string[], context: CliContext): Promise<number> {
  try {
    await run(argv, context);
    return 0;
  } catch (error) {
    if (error instanceof UsageError) {
      context.stderr.write(`svc-car-sim: ${error.message}\nRun svc-car-sim --help for the flags.\n`);
      return 2;
    }
    if (error instanceof SimulatorError) {
      context.stderr.write(`svc-car-sim: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
}
