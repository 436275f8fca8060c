/**
 * bench:fleet's provisioned fleet, made once through the service and kept for later runs: the
 * cars' credentials, Mosquitto's dynamic-security file and the service's database (a Postgres
 * database of its own, `svc_bench_fleet_<cars>`, or a PGlite folder), with how long provisioning took.
 */
import { execFileSync } from 'node:child_process';
import { pbkdf2Sync, randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { type CarCredential, provisionCars } from '@svc/car-simulator';
import { validateDeviceId } from '@svc/sdk';
import knex from 'knex';
import { hashBrokerSecret } from '../../server/src/broker/credentials.ts';
import { dynsecAcls } from '../../server/src/broker/mosquitto-dynsec.ts';
import { grantServiceRole, startMosquitto } from '../../server/test/support/mosquitto.ts';
import { adminEmail, type Cleanup, type ServiceReady, signInAdmin } from './service.ts';

/** How many cars one provisioning step takes: its time is recorded, so that the growth shows. */
export const provisioningStep = 250;
/**
 * Provisioning requests at once: Mosquitto does each one's two dynamic-security changes in turn
 * (a write of the whole file each), so more only wait there, and near the service's 10 s
 * answer time once the file is large.
 */
export const provisioningConcurrency = 2;
/** The fleet sizes whose provisioning time the report gives. */
export const provisioningMilestones = [1000, 5000, 10_000];

/**
 * How the fleet was provisioned: `mosquitto`, through the service on Mosquitto, as in production
 * (what is timed includes Mosquitto's dynamic security); `file`, through the service on its
 * embedded broker, Mosquitto's dynamic-security file then written from the same credentials in one
 * go (fleetDynsecFile), a route for the benchmark's own sake: what is timed is the service's work alone.
 */
export type ProvisioningRoute = 'mosquitto' | 'file';

export interface ProvisioningRecord {
  route: ProvisioningRoute;
  /** When it was measured (ISO), on which Node, on how many cores, with what load average around it. */
  date: string;
  node: string;
  cores: number;
  loadBefore: string;
  loadAfter: string;
  /** Seconds since provisioning began, after each step; `cars` provisioned by then. */
  steps: { cars: number; seconds: number }[];
}

export interface ProvisionedFleet {
  /** The cars that drive, and the probe cars (bench/support/probe-cars.ts). */
  cars: CarCredential[];
  probes: CarCredential[];
  /** The Postgres database's name, or the PGlite folder (DATA_DIR) when there is no DATABASE_URL. */
  store: { database: string } | { dataDir: string };
  /** The key the database's secrets are sealed with (SVC_KEY_ENCRYPTION_KEY). */
  keyEncryptionKey: string;
  /** Mosquitto's admin, who holds the service's role: the service's MQTT_USERNAME. */
  brokerAdmin: { username: string; password: string };
  provisioning: ProvisioningRecord;
}

/** Where a fleet is kept, and what it needs to start again. */
export interface FleetCache {
  folder: string;
  dynsecFile: string;
  fleet: ProvisionedFleet;
  /** Kept from an earlier run (else provisioned by this one). */
  reused: boolean;
}

/** Starts the service in a child process on `env`; what the fleet needs of it. */
export type StartService = (
  env: Record<string, string>,
) => Promise<{ ready: ServiceReady; stop(): Promise<void> }>;

const loadAverage = () =>
  loadavg()
    .map((load) => load.toFixed(2))
    .join(' ');

/** The service's environment on the kept store (its own DATA_DIR for Postgres, which holds nothing there). */
export function fleetServiceEnv(
  fleet: ProvisionedFleet,
  databaseUrl: string | undefined,
  /** Mosquitto; undefined for the service's embedded broker. */
  brokerUrl: string | undefined,
  cleanups: Cleanup[],
): Record<string, string> {
  const env: Record<string, string> = {
    HOST: '127.0.0.1',
    PORT: '0',
    METRICS_PORT: '0',
    SVC_ADMIN_EMAILS: adminEmail,
    SVC_KEY_ENCRYPTION_KEY: fleet.keyEncryptionKey,
    ...(brokerUrl
      ? {
          MQTT_URL: brokerUrl,
          MQTT_USERNAME: fleet.brokerAdmin.username,
          MQTT_PASSWORD: fleet.brokerAdmin.password,
        }
      : { MQTT_PORT: '0' }),
  };
  if ('database' in fleet.store) {
    if (!databaseUrl) throw new Error('this fleet was provisioned on Postgres: set DATABASE_URL');
    const url = new URL(databaseUrl);
    url.pathname = `/${fleet.store.database}`;
    env.DATABASE_URL = url.href;
    const dataDir = join(tmpdir(), `svc-bench-fleet-${process.pid}-${randomBytes(4).toString('hex')}`);
    mkdirSync(dataDir);
    cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    env.DATA_DIR = dataDir;
  } else {
    env.DATA_DIR = fleet.store.dataDir;
  }
  return env;
}

async function withServer<T>(databaseUrl: string, use: (server: knex.Knex) => Promise<T>): Promise<T> {
  const server = knex({ client: 'pg', connection: databaseUrl, pool: { min: 0, max: 1 } });
  try {
    return await use(server);
  } finally {
    await server.destroy();
  }
}

/** The kept fleet in `folder`, if it is there, of the size asked, and its database holds its cars. */
async function keptFleet(
  folder: string,
  size: { cars: number; probes: number },
  databaseUrl: string | undefined,
): Promise<FleetCache | string> {
  const fleetFile = join(folder, 'fleet.json');
  const dynsecFile = join(folder, 'dynamic-security.json');
  if (!existsSync(fleetFile) || !existsSync(dynsecFile)) return 'nothing kept';
  let fleet: ProvisionedFleet;
  try {
    fleet = JSON.parse(readFileSync(fleetFile, 'utf8')) as ProvisionedFleet;
  } catch (error) {
    return `${fleetFile} is unreadable (${(error as Error).message})`;
  }
  if (fleet.cars?.length !== size.cars || fleet.probes?.length !== size.probes)
    return `it holds ${fleet.cars?.length} cars and ${fleet.probes?.length} probes`;
  if ('database' in fleet.store !== (databaseUrl !== undefined))
    return 'it was provisioned on the other store (Postgres / PGlite)';
  if ('database' in fleet.store) {
    const { database } = fleet.store;
    const cars = await withServer(databaseUrl as string, async (server) => {
      const found = await server.raw('select 1 from pg_database where datname = ?', [database]);
      if (found.rows.length === 0) return undefined;
      const url = new URL(databaseUrl as string);
      url.pathname = `/${database}`;
      return withServer(url.href, async (db) =>
        Number((await db('cars').count<{ count: string }>('* as count').first())?.count),
      );
    });
    if (cars !== size.cars + size.probes) return `its database ${database} holds ${cars ?? 'no'} cars`;
  }
  return { folder, dynsecFile, fleet, reused: true };
}

/**
 * The fleet of `cars` (+ `probes`) cars: the one kept in `folder` when it is there and whole (unless
 * `reprovision`), else provisioned now through the service, one car a request as an operator's
 * script would (`POST /api/v1/admin/cars`, two at a time), timed every `provisioningStep` cars, and
 * kept. `startService` runs the service in a child process.
 */
export async function provisionedFleet(options: {
  folder: string;
  cars: number;
  probes: number;
  databaseUrl: string | undefined;
  /**
   * The Postgres database's name; default `svc_bench_fleet_<cars>`, the kept fleet's. A fleet thrown
   * away (a smoke run) takes one of its own, so that two runs at once on one server meet nothing of
   * each other's.
   */
  database?: string;
  reprovision: boolean;
  route: ProvisioningRoute;
  startService: StartService;
  /** A broker's settings beyond the tests' (bench:fleet's connection bounds). */
  brokerSettings: string[];
  log(line: string): void;
}): Promise<FleetCache> {
  const { folder, databaseUrl, log } = options;
  if (!options.reprovision) {
    const kept = await keptFleet(folder, options, databaseUrl);
    if (typeof kept !== 'string') {
      log(`reusing the fleet kept in ${folder} (BENCH_FLEET_REPROVISION=1 provisions it again)`);
      return kept;
    }
    log(`provisioning a fleet in ${folder}: ${kept}`);
  }
  rmSync(folder, { recursive: true, force: true });
  mkdirSync(folder, { recursive: true });
  const dynsecFile = join(folder, 'dynamic-security.json');
  const store: ProvisionedFleet['store'] = databaseUrl
    ? { database: options.database ?? `svc_bench_fleet_${options.cars}` }
    : { dataDir: join(folder, 'data') };
  if ('database' in store) {
    await withServer(databaseUrl as string, async (server) => {
      await server.raw('drop database if exists ?? with (force)', [store.database]);
      await server.raw('create database ??', [store.database]);
    });
  }
  const mosquitto =
    options.route === 'mosquitto' ? await startMosquitto({ settings: options.brokerSettings }) : undefined;
  const stops: Cleanup[] = mosquitto ? [() => mosquitto.stop()] : [];
  try {
    const fleet: ProvisionedFleet = {
      cars: [],
      probes: [],
      store,
      keyEncryptionKey: randomBytes(32).toString('base64'),
      brokerAdmin: mosquitto?.admin ?? { username: 'svc-admin', password: randomBytes(18).toString('hex') },
      provisioning: {
        route: options.route,
        date: new Date().toISOString(),
        node: process.versions.node,
        cores: cpus().length,
        loadBefore: loadAverage(),
        loadAfter: '',
        steps: [],
      },
    };
    const service = await options.startService(fleetServiceEnv(fleet, databaseUrl, mosquitto?.url, stops));
    stops.unshift(() => service.stop());
    const token = await signInAdmin(service.ready);
    const total = options.cars + options.probes;
    const credentials: CarCredential[] = [];
    const started = performance.now();
    while (credentials.length < total) {
      const count = Math.min(provisioningStep, total - credentials.length);
      credentials.push(
        ...(await provisionCars({
          apiUrl: service.ready.url,
          token,
          count,
          brand: 'brand_a',
          concurrency: mosquitto ? provisioningConcurrency : undefined,
        })),
      );
      const seconds = (performance.now() - started) / 1000;
      fleet.provisioning.steps.push({ cars: credentials.length, seconds });
      if (credentials.length % 1000 < provisioningStep || credentials.length === total)
        log(`provisioned ${credentials.length} of ${total} cars in ${seconds.toFixed(1)} s`);
    }
    fleet.provisioning.loadAfter = loadAverage();
    fleet.cars = credentials.slice(0, options.cars);
    fleet.probes = credentials.slice(options.cars);
    if (mosquitto) {
      // Mosquitto wrote the file before it answered the last command: it holds every car.
      copyFileSync(mosquitto.dynsecFile, dynsecFile);
    } else {
      writeFleetDynsecFile(dynsecFile, fleet.brokerAdmin, credentials);
      log(`wrote Mosquitto's dynamic-security file for the ${total} cars`);
    }
    writeFileSync(join(folder, 'fleet.json'), JSON.stringify(fleet), { mode: 0o600 });
    return { folder, dynsecFile, fleet, reused: false };
  } finally {
    for (const stop of stops) await stop();
  }
}

/**
 * Mosquitto 2.0's dynamic-security file for `cars`, as the service's provisioning makes it through
 * the control API (mosquitto-dynsec.ts): per car a client pinned to its device id, whose
 * description records its password's hash, and a role with its row of the ACL table; the password
 * as the plugin keeps it (PBKDF2-SHA512, 101 iterations, 12 bytes of salt). Written once instead
 * of once per change. The service checks it at start (its broker-credential sync lists every
 * client and compares the hashes with Postgres), and every car signing in checks its password.
 */
function writeFleetDynsecFile(
  file: string,
  admin: { username: string; password: string },
  cars: CarCredential[],
): void {
  execFileSync('mosquitto_ctrl', ['dynsec', 'init', file, admin.username, admin.password], {
    stdio: 'ignore',
  });
  grantServiceRole(file, admin.username);
  const config = JSON.parse(readFileSync(file, 'utf8')) as { clients: unknown[]; roles: unknown[] };
  for (const car of cars) {
    const { brand, nativeId } = validateDeviceId(car.deviceId);
    const salt = randomBytes(12);
    config.clients.push({
      username: car.deviceId,
      clientid: car.deviceId,
      textdescription: `svc credential sha256:${hashBrokerSecret(car.password)}`,
      roles: [{ rolename: car.deviceId }],
      password: pbkdf2Sync(car.password, salt, 101, 64, 'sha512').toString('base64'),
      salt: salt.toString('base64'),
      iterations: 101,
    });
    config.roles.push({
      rolename: car.deviceId,
      acls: dynsecAcls({ username: car.deviceId, role: 'car', brand, nativeId }).map((acl) => ({
        ...acl,
        priority: 0,
      })),
    });
  }
  writeFileSync(file, JSON.stringify(config));
}

/** The kept fleet's folder: BENCH_FLEET_CACHE, else under node_modules/.cache. */
export function fleetFolder(cars: number, probes: number): string {
  const base = process.env.BENCH_FLEET_CACHE?.trim() || 'node_modules/.cache/svc-bench-fleet';
  return resolve(base, `${cars}-cars-${probes}-probes`);
}

/**
 * A smoke run's fleet goes with it, whether or not its provisioning finished: its folder and, on
 * Postgres (`databaseUrl`), its `database`.
 */
export async function discardFleet(
  fleet: { folder: string; database: string },
  databaseUrl: string | undefined,
): Promise<void> {
  if (databaseUrl) {
    await withServer(databaseUrl, (server) =>
      server.raw('drop database if exists ?? with (force)', [fleet.database]),
    );
  }
  rmSync(fleet.folder, { recursive: true, force: true });
}

/** The provisioning time at each milestone the fleet reached (interpolated within a step: none is). */
export function milestoneSeconds(record: ProvisioningRecord): { cars: number; seconds: number }[] {
  return provisioningMilestones.flatMap((cars) => {
    const step = record.steps.find((reached) => reached.cars >= cars);
    return step && step.cars === cars ? [{ cars, seconds: step.seconds }] : [];
  });
}
