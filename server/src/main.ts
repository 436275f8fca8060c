/**
 * `npm start` (through tsx) and `npm run serve` (the production build, server/dist/main.js): the
 * service in one process, embedded storage unless DATABASE_URL says otherwise. `--check` checks
 * the setup only; `--migrate` (`npm run migrate`) runs the migrations only.
 */
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AdminCode } from './accounts/admin-codes.ts';
import { createApp } from './app.ts';
import { BrokerSetupError } from './broker/broker.ts';
import { docsDir } from './built-files.ts';
import { type Config, ConfigError, readConfig } from './config.ts';
import { ListenError, type Listener } from './listen-error.ts';
import { createLogger, type Logger } from './logger.ts';
import { release } from './release.ts';
import {
  DataDirInUse,
  type DataDirLock,
  dataDirHolder,
  lockDataDir,
  lockFileOf,
} from './store/data-dir-lock.ts';
import { describeStore, embeddedDbDir, openStore, storeOpened } from './store/db.ts';
import { KeyEncryptionError } from './store/key-encryption.ts';
import { IncompatibleDatabase, migrate } from './store/migrator.ts';
import { databaseUrlProblem, storeUnavailableReason } from './store/unavailable.ts';
import { PackageStoreSetupError } from './uploads/package-store.ts';

/** A mistake in the setup: one line naming what to change (one per mistake), exit 2, no stack. */
function refuse(...messages: string[]): never {
  process.stderr.write(messages.map((message) => `svc: ${message}\n`).join(''));
  process.exit(2);
}

/** The settings, and the warnings (a former name, …) to log once the log is open. */
function loadConfigOrRefuse(): ReturnType<typeof readConfig> {
  try {
    return readConfig();
  } catch (error) {
    if (error instanceof ConfigError) refuse(error.message);
    throw error;
  }
}

/**
 * A listener's place: the API's (HOST, PORT), the metrics' (METRICS_HOST, METRICS_PORT) or the
 * embedded broker's (HOST, MQTT_PORT).
 */
interface Place {
  prefix: Listener;
  host: string;
  port: number;
  /** The service's other listeners' ports: a taken port's advice never names them. */
  otherPorts: number[];
}

function placeOf(config: Config, prefix: Listener): Place {
  const ports: Record<Listener, number> = {
    '': config.port,
    METRICS: config.metricsPort,
    MQTT: config.mqttPort,
    MQTT_TLS: config.mqttTls?.port ?? 0,
  };
  return {
    prefix,
    // The broker listens on the API's host; metrics on a host of their own.
    host: prefix === 'METRICS' ? config.metricsHost : config.host,
    port: ports[prefix],
    otherPorts: Object.entries(ports).flatMap(([other, port]) =>
      other === prefix || port === 0 ? [] : [port],
    ),
  };
}

/** One line saying which setting to change, for a listener that could not start; else undefined. */
function portTaken({ prefix, host, port, otherPorts }: Place, error: unknown): string | undefined {
  const PORT = prefix ? `${prefix}_PORT` : 'PORT';
  // The broker listens on the API's host.
  const HOST = prefix === 'METRICS' ? 'METRICS_HOST' : 'HOST';
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'EADDRINUSE') {
    let next = port + 1;
    while (otherPorts.includes(next)) next += 1;
    // A broker already on that port may be the one meant: MQTT_URL makes the service use it.
    const orExternal =
      prefix === 'MQTT' || prefix === 'MQTT_TLS'
        ? ' To use a broker that runs already, set MQTT_URL (with MQTT_USERNAME and MQTT_PASSWORD).'
        : '';
    return `${PORT} ${port} is taken on ${host} (another program, perhaps another svc, listens there): set ${PORT} to a free port, such as ${PORT}=${next} npm start, or ${PORT}=0 for any.${orExternal}`;
  }
  if (code === 'EACCES') {
    return `${PORT} ${port} on ${host} needs privileges this user lacks: set ${PORT} to 1024 or above.`;
  }
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN')
    return `${HOST} ${host} is not an address of this machine: set ${HOST}, such as ${HOST}=127.0.0.1.`;
  return undefined;
}

/** Why a listener cannot start at `place`, checked by listening there a moment; undefined if it can. */
async function probe(place: Place): Promise<string | undefined> {
  if (place.port === 0) return undefined;
  const server = createServer();
  return new Promise<string | undefined>((resolve) => {
    server.once('error', (error) => resolve(portTaken(place, error) ?? String(error)));
    server.listen(place.port, place.host, () => server.close(() => resolve(undefined)));
  });
}

/** Every listener of the service that cannot start, each in a line: an operator fixes them all at once. */
async function listenerProblems(config: Config): Promise<string[]> {
  const prefixes: Listener[] = config.mqttUrl
    ? ['', 'METRICS']
    : ['', 'METRICS', 'MQTT', ...(config.mqttTls ? (['MQTT_TLS'] as const) : [])];
  const problems = await Promise.all(prefixes.map((prefix) => probe(placeOf(config, prefix))));
  return problems.filter((problem) => problem !== undefined);
}

/** Why DATA_DIR cannot be the data folder (a file is there, or this user may not make it), if it cannot. */
function dataDirProblem(dataDir: string, make: boolean): string | undefined {
  const isFile = `DATA_DIR ${dataDir} is a file, not a folder: set DATA_DIR to a folder (it is made when missing).`;
  if (existsSync(dataDir) && !statSync(dataDir).isDirectory()) return isFile;
  if (!make) return undefined;
  try {
    mkdirSync(dataDir, { recursive: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // A file where one of its parent folders should be.
    if (code === 'ENOTDIR' || code === 'EEXIST') return isFile.replace('is a file', 'lies under a file');
    if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS')
      return `DATA_DIR ${dataDir} cannot be made by this user: set DATA_DIR to a folder you may write.`;
    throw error;
  }
  return undefined;
}

/**
 * `main.ts --check`: what can be known before `npm start` spends time building: the settings,
 * the data folder's lock, and the ports. The service checks them all again when it starts.
 */
async function check(): Promise<void> {
  // The warnings wait for the start that follows, which logs them.
  const { config } = loadConfigOrRefuse();
  if (!config.databaseUrl) {
    const problem = dataDirProblem(config.dataDir, false);
    if (problem) refuse(problem);
    const holder = dataDirHolder(config.dataDir);
    if (holder !== undefined)
      refuse(new DataDirInUse(config.dataDir, holder, lockFileOf(config.dataDir)).message);
  }
  const problems = await listenerProblems(config);
  if (problems.length > 0) refuse(...problems);
}

/** The embedded store's folder, made and locked for this process; undefined on Postgres. */
function lockEmbeddedStore(config: Config): DataDirLock | undefined {
  if (config.databaseUrl) return undefined;
  const problem = dataDirProblem(config.dataDir, true);
  if (problem) refuse(problem);
  try {
    return lockDataDir(config.dataDir);
  } catch (error) {
    if (error instanceof DataDirInUse) refuse(error.message);
    throw error;
  }
}

/**
 * A database a newer build migrated beyond this release: one line naming the migration and what
 * to do, exit 2. Plain, as every setup mistake, when the log is for a person (a terminal); a JSON
 * line like the rest of the log otherwise, so that a log collector keeps it.
 */
function refuseIncompatible(logger: Logger, error: IncompatibleDatabase): never {
  if (process.stderr.isTTY) refuse(error.message);
  logger.error(`cannot start: ${error.message}`, { migration: error.migration, release });
  process.exit(2);
}

/** What the store said when the migrations could not run, in the operator's terms; exits. */
function refuseStore(config: Config, logger: Logger, error: unknown): never {
  if (error instanceof IncompatibleDatabase) refuseIncompatible(logger, error);
  const misnamed = config.databaseUrl ? databaseUrlProblem(config.databaseUrl, error) : undefined;
  if (misnamed) refuse(misnamed);
  // Start-up failures go through the operator's log like any other, never as a raw stack.
  const unreachable = config.databaseUrl ? storeUnavailableReason(error) : undefined;
  if (unreachable) {
    logger.error('cannot start: the database is unreachable', {
      store: describeStore({ databaseUrl: config.databaseUrl }),
      reason: unreachable,
      hint: 'check that Postgres runs at DATABASE_URL, or unset DATABASE_URL for the embedded store',
    });
  } else {
    logger.error('cannot start', { error });
  }
  process.exit(1);
}

/**
 * `main.ts --migrate` (`npm run migrate`): the migrations alone, logged, then exit 0: the first
 * step of a rolling upgrade, before the replicas are replaced one at a time (docs/operating.md).
 */
async function migrateOnly(): Promise<void> {
  const { config, warnings } = loadConfigOrRefuse();
  const lock = lockEmbeddedStore(config);
  const logger = createLogger({ level: config.logLevel });
  for (const warning of warnings) logger.warn(warning);
  const db = openStore({
    databaseUrl: config.databaseUrl,
    pgliteDir: config.databaseUrl ? undefined : embeddedDbDir(config.dataDir),
    logger,
  });
  try {
    await storeOpened(db);
    await migrate(db, { logger });
  } catch (error) {
    await db.destroy().catch(() => undefined);
    lock?.release();
    refuseStore(config, logger, error);
  }
  await db.destroy();
  lock?.release();
}

async function main(): Promise<void> {
  const { config, warnings } = loadConfigOrRefuse();
  const lock = lockEmbeddedStore(config);
  const taken = await listenerProblems(config);
  if (taken.length > 0) {
    lock?.release();
    refuse(...taken);
  }
  const logger = createLogger({ level: config.logLevel });
  for (const warning of warnings) logger.warn(warning);
  let service: ReturnType<typeof createApp>;
  try {
    service = createApp(config, { logger, docsDir });
  } catch (error) {
    lock?.release();
    if (error instanceof KeyEncryptionError) refuse(error.message);
    throw error;
  }
  let started: Awaited<ReturnType<typeof service.start>>;
  try {
    started = await service.start();
  } catch (error) {
    await service.stop().catch(() => undefined);
    lock?.release();
    const message =
      error instanceof ListenError ? portTaken(placeOf(config, error.settings), error) : undefined;
    if (message) refuse(message);
    if (
      error instanceof BrokerSetupError ||
      error instanceof PackageStoreSetupError ||
      error instanceof KeyEncryptionError
    )
      refuse(error.message);
    refuseStore(config, logger, error);
  }
  void service.warm();
  const { url, metricsUrl, mqttUrl, mqttTlsUrl, adminCodes } = started;
  const publicUrl = config.publicUrl ?? url;
  const store = describeStore({
    databaseUrl: config.databaseUrl,
    pgliteDir: config.databaseUrl ? undefined : embeddedDbDir(config.dataDir),
  });
  // Before the banner: whoever reads `Stop with` may signal at once, and Node's default for a
  // signal without a handler is to end the process there, the lock and the store left as they are.
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info('stopping: finishing in-flight requests', {
      signal,
      graceSeconds: config.shutdownGraceSeconds,
    });
    service.stop().then(
      ({ cut }) => {
        lock?.release();
        const requests =
          cut === 0
            ? 'requests finished'
            : `${cut} request${cut === 1 ? '' : 's'} cut after the ${config.shutdownGraceSeconds} s grace`;
        process.stdout.write(`svc stopped: ${requests}, store closed.\n`);
        process.exit(0);
      },
      (error: unknown) => {
        logger.error('stop failed', { error });
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.stdout.write(
    [
      `svc ${release} is running`,
      `  API       ${publicUrl}/api/v1`,
      `  console   ${publicUrl}/console`,
      `  docs      ${publicUrl}/docs`,
      `  contract  ${publicUrl}/openapi.json`,
      `  data      ${config.databaseUrl ? store : config.dataDir} (${store.split(' ')[0]})`,
      `  metrics   ${metricsUrl} (for Prometheus; not on the public port)`,
      `  MQTT      ${mqttUrl} (${config.mqttUrl ? 'MQTT_URL, managed through dynamic security' : 'the embedded broker'})`,
      ...(mqttTlsUrl ? [`  MQTT TLS  ${mqttTlsUrl} (the embedded broker, MQTT_TLS_CERT)`] : []),
      ...(config.webhookAllowPrivate
        ? ['  webhooks  may go to private and loopback addresses, and http:// (SVC_WEBHOOK_ALLOW_PRIVATE)']
        : []),
      ...adminCodeLines(publicUrl, adminCodes),
      `Stop with Ctrl-C.`,
      '',
    ].join('\n'),
  );
}

/**
 * The operator's one-time admin codes: printed here (never logged) because only the operator sees
 * this terminal, and that is what makes a code proof that its user was made an admin on purpose.
 */
function adminCodeLines(publicUrl: string, codes: AdminCode[]): string[] {
  if (codes.length === 0) return [];
  return [
    'Admin codes, one use each, valid 24 hours (a restart prints new ones):',
    ...codes.map(({ email, code }) => `  ${email}  ${code}`),
    `  Sign in as that account (it may sign up first), then claim the role:`,
    `  curl -X POST ${publicUrl}/api/v1/account/admin-claims -H "Authorization: Bearer $ADMIN_TOKEN" \\`,
    `    -H 'content-type: application/json' -d '{"code":"<the code>"}'`,
  ];
}

if (process.argv.includes('--check')) await check();
else if (process.argv.includes('--migrate')) await migrateOnly();
else await main();
