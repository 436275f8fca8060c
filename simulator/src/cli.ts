/** `svc-car-sim`: flags → cars → a running fleet until Ctrl-C. Exit 0 when stopped, 1 when it failed, 2 on bad flags. */
import { parseArgs } from 'node:util';
import { type Brand, brands, isBrand } from '@svc/sdk';
import type { CarCredential } from './car.ts';
import { readCredentialsFile, writeCredentialsFile } from './credentials.ts';
import { formatDuration, parseDuration } from './duration.ts';
import { SimulatorError } from './errors.ts';
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

export const usage = `svc-car-sim: simulated cars on the svc broker

Each car signs in with its credential (client id = user name = its device id) and a retained
"offline" last will, says "online", reports status and telemetry (driving a loop around Munich),
and answers the commands it receives. Ctrl-C: every car says "offline" and disconnects.

Usage:
  svc-car-sim --credentials cars.json [--cars N] [options]
  svc-car-sim --cars N [--api-url URL] [--token TOKEN] [--save-credentials cars.json] [options]

Cars:
  --credentials FILE       a JSON list of {"device_id", "password"}, one per car (what
                           provisioning returned); with --cars N, only the first N
  --cars N                 without --credentials: provision N new cars through the admin API
  --api-url URL            the service to provision them with (default $SVC_API_URL, else ${defaultApiUrl})
  --token TOKEN            an admin's access token (default $SVC_TOKEN)
  --brand BRAND            the brand of the new cars: ${brands.join(', ')} (default brand_a)
  --save-credentials FILE  keep the new cars' credentials, for a later --credentials run

Broker and rates:
  --mqtt-url URL           the broker: the MQTT line npm start printed (default $SVC_MQTT_URL, else ${defaultMqttUrl})
  --status-every DURATION  status report period (default ${formatDuration(defaultStatusEvery)}), e.g. 500ms, 2s, 1m
  --telemetry-every DURATION
                           telemetry period (default ${formatDuration(defaultTelemetryEvery)})
  -h, --help               this help

Examples:
  svc-car-sim --cars 5 --api-url http://127.0.0.1:8080 --token "$ADMIN_TOKEN" --save-credentials cars.json
  svc-car-sim --credentials cars.json --telemetry-every 200ms
`;

/** A mistake in the flags: the message, then a pointer to --help; exit 2. */
class UsageError extends Error {}

const flags = {
  cars: { type: 'string' },
  credentials: { type: 'string' },
  'api-url': { type: 'string' },
  token: { type: 'string' },
  brand: { type: 'string' },
  'save-credentials': { type: 'string' },
  'mqtt-url': { type: 'string' },
  'status-every': { type: 'string' },
  'telemetry-every': { type: 'string' },
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

async function chooseCars(values: Flags, context: CliContext): Promise<CarCredential[]> {
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
    return credentials.slice(0, wanted ?? credentials.length);
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
  const credentials = await provisionCars({ apiUrl: url, token, count: wanted, brand: brand as Brand });
  context.stderr.write(`provisioned ${credentials.length} car(s) of ${brand} at ${url}\n`);
  if (values['save-credentials'] !== undefined) {
    await writeCredentialsFile(values['save-credentials'], credentials);
    context.stderr.write(`saved their credentials to ${values['save-credentials']}\n`);
  } else {
    // The passwords are shown once by the service: without them these cars cannot be run again.
    context.stderr.write(
      'their passwords are not kept: pass --save-credentials FILE to run them again later\n',
    );
  }
  return credentials;
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
  const cars = await chooseCars(values, context);
  if (context.stop.aborted) return;

  const simulator = await startSimulator({
    mqttUrl: broker,
    cars,
    statusEveryMs,
    telemetryEveryMs,
    output: context.stdout,
    warnings: context.stderr,
  });
  context.stderr.write(
    `${cars.length} car(s) online at ${broker}: status every ${formatDuration(statusEveryMs)}, telemetry every ${formatDuration(telemetryEveryMs)}; Ctrl-C to stop\n`,
  );
  for (const car of simulator.cars) context.stderr.write(`  ${car.deviceId}\n`);
  const ended = await Promise.race([
    new Promise<'stopped'>((resolve) => {
      if (context.stop.aborted) resolve('stopped');
      context.stop.addEventListener('abort', () => resolve('stopped'), { once: true });
    }),
    simulator.allRefused.then(() => 'refused' as const),
  ]);
  await simulator.stop();
  if (ended === 'refused') {
    throw new SimulatorError(
      'the broker refused every car its password: give the new credentials (--credentials), or provision new cars',
    );
  }
  context.stderr.write(`${cars.length} car(s) offline\n`);
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
