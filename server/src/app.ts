/**
 * The app factory: takes config and dependencies, returns `{ app, start, stop }`. Middleware in a
 * fixed order: requests in flight and their pacing → OPTIONS and CORS → old-CLI check → the
 * presigned upload URL's form → per operation: express.json (where it takes JSON), contract
 * validator, handler → docs, the runtime script, the console → problems.
 */

import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { routes } from '../../generated/routes.ts';
import type { AdminCode } from './accounts/admin-codes.ts';
import type { Passwords } from './accounts/passwords.ts';
import type { ServiceBroker } from './broker/broker.ts';
import { createBrokerMetrics } from './broker/broker-metrics.ts';
import { createRedisCredentialStore, createSqlCredentialStore } from './broker/credentials.ts';
import { createEmbeddedBroker } from './broker/embedded-broker.ts';
import { createMosquittoBroker } from './broker/mosquitto-dynsec.ts';
import { contractFile } from './built-files.ts';
import { syncBrokerCredentials } from './cars/broker-credential-sync.ts';
import { connectedCarsOfReplica } from './cars/connected-cars.ts';
import type { TelemetryBatchOptions } from './cars/telemetry-batch.ts';
import { type Clock, systemClock } from './clock.ts';
import { createCommandMetrics } from './commands/command-metrics.ts';
import type { Config } from './config.ts';
import { bearerAuthenticator } from './http/authenticate.ts';
import { bindHandlers } from './http/bind-handlers.ts';
import { requireCurrentCli } from './http/cli-version.ts';
import { consoleRouter } from './http/console.ts';
import { crossOrigin } from './http/cors.ts';
import { docsPaths, docsRouter } from './http/docs.ts';
import { notFound, problemMiddleware } from './http/errors.ts';
import { createHandlers } from './http/handlers/index.ts';
import { inFlightRequests } from './http/in-flight.ts';
import { requireIssuedUploadUrl } from './http/presigned-upload.ts';
import { shuttingDown } from './http/problem.ts';
import { baseUrlFor } from './http/public-url.ts';
import { requestLog } from './http/request-log.ts';
import { requestPacing } from './http/request-pacing.ts';
import { sdkScriptPaths, sdkScriptRouter } from './http/sdk-script.ts';
import { answerParserErrors, originFormTarget } from './http/transport.ts';
import { contractValidators } from './http/validation.ts';
import { createLogger, type Logger } from './logger.ts';
import { createMetrics, listenForMetrics } from './metrics.ts';
import { type Bridge, type BrokerConnection, createBridge, serviceBrokerConnection } from './mqtt/bridge.ts';
import { createBridgeHealth } from './mqtt/bridge-health.ts';
import { createBridgeMetrics } from './mqtt/bridge-metrics.ts';
import { createServices } from './services.ts';
import { type Db, embeddedDbDir, openOwnConnection, openStore, storeOpened } from './store/db.ts';
import { type KeyRing, loadKeyRing } from './store/key-encryption.ts';
import { migrate } from './store/migrator.ts';

/** How often idempotency keys past their 24 hours are deleted. */
const idempotencySweepMs = 60 * 60 * 1000;

/** How often a replica looks whether the signing keys are due to rotate, and deletes spent ones. */
const signingKeyCheckMs = 60 * 1000;

export interface AppDependencies {
  /** An open store; by default one is opened from the config (and closed by `stop`). */
  db?: Db;
  clock?: Clock;
  logger?: Logger;
  /** Folder with the built reference page (`npm run build`); /docs says how to build it when absent. */
  docsDir?: string;
  /** The browser build of the runtime served at /_svc/sdk.js; by default client/dist/runtime.browser.js. */
  sdkScript?: string;
  /** The built web console served at /console; by default console/dist (`npm run build`). */
  consoleDir?: string;
  /** Password hashing at another scrypt cost (tests); by default the service's own. */
  passwords?: Passwords;
  /**
   * The broker the MQTT bridge signs in to, with the service's own credential. Without it no
   * bridge runs: nothing cars publish is stored.
   */
  brokerConnection?: BrokerConnection;
  /** How the bridge batches telemetry (tests); by default its own. */
  telemetryBatch?: TelemetryBatchOptions;
  /** How often the signing keys' schedule is looked at, in milliseconds (tests); by default a minute. */
  signingKeyCheckMs?: number;
  /** The key-encryption keys; by default from the config (`loadKeyRing`). */
  keyRing?: KeyRing;
}

export interface RunningApp {
  url: string;
  /** Where Prometheus reads the metrics. */
  metricsUrl: string;
  /** Where cars connect: the embedded broker (its real port when MQTT_PORT is 0), or MQTT_URL. */
  mqttUrl: string;
  /** The embedded broker's TLS listener (its real port when MQTT_TLS_PORT is 0), when it has one. */
  mqttTlsUrl: string | undefined;
  /** One-time codes for the listed admin emails not yet claimed: for the operator's eyes only. */
  adminCodes: AdminCode[];
}

/**
 * Which listener: `''` the API, `METRICS` the metrics, `MQTT` the embedded broker, `MQTT_TLS` its
 * TLS listener.
 */
export type Listener = '' | 'METRICS' | 'MQTT' | 'MQTT_TLS';

/**
 * A listener that could not start, with the prefix of the settings that place it: `''` for the
 * API (HOST, PORT), `METRICS` for the metrics (METRICS_HOST, METRICS_PORT), `MQTT` for the
 * embedded broker (HOST, MQTT_PORT).
 */
export class ListenError extends Error {
  override readonly name = 'ListenError';
  readonly code: string | undefined;
  readonly settings: Listener;
  constructor(settings: Listener, cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.settings = settings;
    this.code = (cause as NodeJS.ErrnoException | undefined)?.code;
  }
}

export interface StoppedApp {
  /** Requests still running at the end of the shutdown grace, and cut. */
  cut: number;
}

export function createApp(config: Config, deps: AppDependencies = {}) {
  const logger = deps.logger ?? createLogger({ level: config.logLevel });
  const clock = deps.clock ?? systemClock;
  // First: a key-encryption key that cannot be had stops start-up before anything opens.
  const keyRing = deps.keyRing ?? loadKeyRing(config);
  const ownsDb = !deps.db;
  const db =
    deps.db ??
    openStore({
      databaseUrl: config.databaseUrl,
      pgliteDir: config.databaseUrl ? undefined : embeddedDbDir(config.dataDir),
      acquireTimeoutMs: config.databaseAcquireTimeoutMs,
      statementTimeoutMs: config.databaseStatementTimeoutMs,
      logger,
    });
  let listeningUrl: string | undefined;
  const audience = (requestHost?: string) =>
    config.publicUrl ?? baseUrlFor(listeningUrl ?? `http://${config.host}:${config.port}`, requestHost);
  const credentials = config.redisUrl
    ? createRedisCredentialStore(config.redisUrl, logger)
    : createSqlCredentialStore(db);
  const metrics = createMetrics();
  // MQTT_URL names a Mosquitto the service manages; otherwise the broker runs in this process.
  const broker: ServiceBroker = config.mqttUrl
    ? createMosquittoBroker({
        url: config.mqttUrl,
        username: config.mqttUsername ?? '',
        password: config.mqttPassword ?? '',
        ca: config.mqttCa,
        logger,
      })
    : createEmbeddedBroker({
        credentials,
        host: config.host,
        port: config.mqttPort,
        logger,
        metrics: createBrokerMetrics(metrics.registry),
        queueBound: { messages: config.mqttMaxQueuedMessages, bytes: config.mqttMaxQueuedBytes },
        tls: config.mqttTls,
      });
  const bridgeHealth = createBridgeHealth(metrics.registry);
  const services = createServices({
    db,
    bridgeHealth,
    config,
    clock,
    audience,
    passwords: deps.passwords,
    credentials,
    broker: broker.accounts,
    logger,
    commandMetrics: createCommandMetrics(metrics.registry),
    keyRing,
  });
  const contract = JSON.parse(readFileSync(contractFile, 'utf8'));

  const bridgeMetrics = createBridgeMetrics(
    metrics.registry,
    // A broker this process does not hold (MQTT_URL, or one given to the bridge) is counted from
    // the cars' presence in the store.
    connectedCarsOfReplica(
      config.mqttUrl || deps.brokerConnection
        ? { broker: 'external', db, replicaId: config.replicaId }
        : { broker: 'embedded', signedInCars: () => broker.signedInCars?.() ?? 0 },
    ),
  );
  /** The bridge signs in to the broker as the service: MQTT 5 shared subscriptions on Mosquitto. */
  const bridgeConnection = (mqttUrl: string): BrokerConnection =>
    deps.brokerConnection ?? serviceBrokerConnection(config, broker.serviceCredential, mqttUrl);
  let bridge: Bridge | undefined;
  /** The bridge's own Postgres connection (see `writer` in bridge.ts); none on PGlite. */
  let bridgeWriter: Db | undefined;
  const app = express();
  app.disable('x-powered-by');
  // No answer is to be taken for another type than it says (a package or a problem as a page).
  app.use((_req, res, next) => {
    res.setHeader('X-Content-Type-Options', 'nosniff');
    next();
  });
  app.set('query parser', 'simple');
  // Behind a load balancer the client address (sign-in limits) comes from X-Forwarded-For.
  if (config.trustProxy) app.set('trust proxy', config.trustProxy);
  // API answers are per caller and rarely repeated; hashing each body for an ETag buys nothing.
  app.set('etag', false);
  // API answers carry no validators (no ETag, no Last-Modified), so no conditional request is
  // ever fresh: without this, `If-None-Match: *` turned a 200 into an empty 304.
  Object.defineProperty(app.request, 'fresh', { configurable: true, get: () => false });
  const inFlight = inFlightRequests();
  const pacing = requestPacing({
    timeoutMs: config.requestTimeoutSeconds * 1000,
    minBytesPerSecond: config.minBodyBytesPerSecond,
  });
  app.use(requestLog(logger), metrics.observeRequests, inFlight.track, pacing.middleware);
  app.use(originFormTarget);
  // Before anything can answer: every answer to a listed origin, a refusal too, must be readable.
  app.use(
    crossOrigin({
      origins: config.corsOrigins,
      contract,
      getPaths: [...docsPaths, ...sdkScriptPaths],
      // The key set is public, and the SDK verifies tokens in browsers too.
      publicPaths: [routes.getJwks.expressPath],
    }),
  );
  app.use(requireCurrentCli);
  // The presigned upload PUT may take as long as its URL lives, and its URL is its credential.
  app.put(
    routes.uploadPackage.expressPath,
    pacing.allowing(config.uploadUrlTtlSeconds * 1000),
    requireIssuedUploadUrl,
  );
  const validators = contractValidators(contract, {
    validateResponses: config.validateResponses,
    jsonLimitBytes: config.jsonLimitBytes,
  });
  app.use(
    bindHandlers(express.Router(), createHandlers(services), {
      authenticate: bearerAuthenticator(services.tokens),
      validate: validators.forOperation,
    }),
  );
  app.use(docsRouter(contract, deps.docsDir, () => audience()));
  app.use(sdkScriptRouter(deps.sdkScript));
  app.use(consoleRouter(deps.consoleDir));
  app.use(notFound);
  app.use(problemMiddleware({ logger, jsonLimitBytes: config.jsonLimitBytes }));

  let server: Server | undefined;
  let stopped = false;
  let metricsServer: Server | undefined;
  let sweeper: NodeJS.Timeout | undefined;
  let sweeping: Promise<void> = Promise.resolve();
  const sweepUploads = () => {
    sweeping = services.uploads
      .sweep()
      .catch((error: unknown) => logger.error('upload sweep failed', { error }));
  };
  // Idempotency keys past their 24 hours are taken as new already; the sweep only frees the room.
  let keySweeper: NodeJS.Timeout | undefined;
  let sweepingKeys: Promise<void> = Promise.resolve();
  const sweepIdempotencyKeys = () => {
    sweepingKeys = services.idempotency
      .sweep()
      .then(() => {})
      .catch((error: unknown) => logger.error('idempotency key sweep failed', { error }));
  };

  // Each replica looks; the store's lock makes one rotation of their looking at once.
  let keyChecker: NodeJS.Timeout | undefined;
  let commandSweeper: NodeJS.Timeout | undefined;
  let commandSweeping: Promise<void> = Promise.resolve();
  let checkingKeys: Promise<void> | undefined;
  const checkSigningKeys = () => {
    checkingKeys ??= services.signingKeys
      .rotateIfDue()
      .then(() => services.signingKeys.deleteExpiredKeys())
      .then(() => {})
      .catch((error: unknown) => logger.error('signing-key rotation check failed', { error }))
      .finally(() => {
        checkingKeys = undefined;
      });
  };

  // The key-value store and the broker are rebuilt from SQL (after a restore, a new Redis or a new
  // Mosquitto). A failure leaves what they hold; the next reconnection or the operator's command
  // tries again. One at a time: a reconnection during a sync waits for it.
  let syncingCredentials: Promise<void> = Promise.resolve();
  const syncCredentials = () => {
    syncingCredentials = syncingCredentials
      .then(() => syncBrokerCredentials({ db, clock, credentials, broker: broker.accounts, keyRing, logger }))
      .then(
        () => {},
        (error: unknown) =>
          logger.error('broker credential sync failed', {
            error,
            hint: 'once the key-value store and the broker answer, run npm run sync-broker-credentials',
          }),
      );
    return syncingCredentials;
  };

  return {
    app,
    services,
    broker,
    async start(): Promise<RunningApp> {
      // A bucket that is not there stops the start, first, rather than every upload after it.
      await services.packages.verify();
      await storeOpened(db);
      // Start-up is no request: on Postgres it runs over a connection of its own, without the
      // requests' timeouts, since a migration may rightly take long and compiling the contract's
      // validators holds the event loop for seconds just now.
      const startup = openOwnConnection(db, {});
      let adminCodes: AdminCode[];
      try {
        await migrate(startup ?? db, { logger });
        await services.signingKeys.ensure();
        adminCodes = await services.adminCodes.issue();
      } finally {
        await startup?.destroy();
      }
      // Uploads whose receivers died (a crash, a kill) are let go, and their partial files deleted,
      // now and whenever a lease could have lapsed since.
      await services.uploads.sweep();
      sweeper = setInterval(sweepUploads, config.uploadLeaseSeconds * 1000).unref();
      sweepIdempotencyKeys();
      keySweeper = setInterval(sweepIdempotencyKeys, idempotencySweepMs).unref();
      keyChecker = setInterval(checkSigningKeys, deps.signingKeyCheckMs ?? signingKeyCheckMs).unref();
      let mqttUrl: string;
      try {
        mqttUrl = await broker.start();
      } catch (error) {
        if (config.mqttUrl) throw error;
        const tls = (error as { listener?: string } | undefined)?.listener === 'MQTT_TLS';
        throw new ListenError(tls ? 'MQTT_TLS' : 'MQTT', error);
      }
      await syncCredentials();
      // A Redis that restarted holds nothing (and one away at start got nothing): it is filled again.
      credentials.onReconnected?.(() => {
        if (!stopped) void syncCredentials();
      });
      // After the migrations, so that what cars report has its tables.
      // Commands wait in SQL until the bridge connects; the sweep expires them meanwhile.
      services.commandOutbox.start();
      commandSweeper = setInterval(() => {
        commandSweeping = services.commandOutbox.sweep().catch((error: unknown) =>
          logger.warn('commands: the expiry sweep failed; it runs again', {
            error: error instanceof Error ? error.message : String(error),
          }),
        );
      }, config.commandSweepSeconds * 1000).unref();
      bridgeWriter = openOwnConnection(db, {
        acquireTimeoutMs: config.databaseAcquireTimeoutMs,
        statementTimeoutMs: config.databaseStatementTimeoutMs,
      });
      const writer = bridgeWriter ?? db;
      bridge = createBridge({
        connection: bridgeConnection(mqttUrl),
        commands: {
          acknowledge: (deviceId, ack) => services.commandLifecycle.acknowledge(deviceId, ack, writer),
          carOnline: services.commandOutbox.carOnline,
          brokerConnected: services.commandOutbox.brokerConnected,
          publisherConnected: services.commandOutbox.wake,
        },
        db,
        writer,
        clock,
        logger,
        metrics: bridgeMetrics,
        health: bridgeHealth,
        telemetryBatch: deps.telemetryBatch,
      });
      services.commandOutbox.attach(bridge.publisher);
      await bridge.start();
      server = app.listen(config.port, config.host);
      answerParserErrors(server);
      // Each request's own deadline is kept by `requestPacing`; Node's, one for the whole server,
      // is only a backstop behind the longest of them (an upload's). Headers take the short one.
      server.requestTimeout = (config.uploadUrlTtlSeconds + config.requestTimeoutSeconds) * 1000;
      server.headersTimeout = Math.min(60_000, config.requestTimeoutSeconds * 1000);
      await new Promise<void>((resolve, reject) => {
        server?.once('listening', resolve).once('error', (error) => reject(new ListenError('', error)));
      });
      const { port } = server.address() as AddressInfo;
      const host = config.host.includes(':') ? `[${config.host}]` : config.host;
      listeningUrl = `http://${host}:${port}`;
      let metricsUrl: string;
      try {
        ({ url: metricsUrl, server: metricsServer } = await listenForMetrics(
          metrics,
          config.metricsHost,
          config.metricsPort,
        ));
      } catch (error) {
        throw new ListenError('METRICS', error);
      }
      return { url: listeningUrl, metricsUrl, mqttUrl, mqttTlsUrl: broker.tlsUrl, adminCodes };
    },
    /**
     * Stops taking connections and lets requests in flight finish for up to the shutdown grace;
     * then answers those still running 503 and closes their connections (a cut upload lets its URL
     * go and deletes its partial file), closes the broker (or the service's connection to it),
     * and closes the store.
     */
    /**
     * Makes the contract's validators in the background, once listening, so that no first request
     * of a path waits for its own; a service in a test leaves them to be made as requests come.
     */
    warm(): Promise<void> {
      return validators.warm(() => stopped);
    },
    async stop(): Promise<StoppedApp> {
      stopped = true;
      clearInterval(sweeper);
      clearInterval(keySweeper);
      clearInterval(keyChecker);
      clearInterval(commandSweeper);
      metricsServer?.close();
      metricsServer = undefined;
      // The outbox, then the bridge, so that neither takes the broker's going for a fault to retry.
      const bridgeStopped = services.commandOutbox
        .stop()
        .then(() => bridge?.stop())
        .then(() => broker.stop());
      let cut = 0;
      if (server) {
        const stopping = server;
        const closed = new Promise<void>((resolve) => stopping.close(() => resolve()));
        stopping.closeIdleConnections();
        let graceTimer: NodeJS.Timeout | undefined;
        const graceOver = new Promise<'grace over'>((resolve) => {
          graceTimer = setTimeout(() => resolve('grace over'), config.shutdownGraceSeconds * 1000);
        });
        const outcome = await Promise.race([closed, graceOver]);
        clearTimeout(graceTimer);
        if (outcome === 'grace over') {
          cut = inFlight.size;
          logger.info('stopping: cutting requests still in flight', { requests: cut });
          await inFlight.cutAll(shuttingDown(), 1000);
          stopping.closeAllConnections();
          await closed;
        }
        server = undefined;
      }
      // Cut uploads release their URL and delete their partial file, and the bridge writes the
      // telemetry still waiting, before the store closes.
      await Promise.all([
        services.uploads.settled(),
        sweeping,
        sweepingKeys,
        checkingKeys,
        syncingCredentials,
        commandSweeping,
        bridgeStopped,
      ]);
      await services.storeReadiness.close();
      services.packages.close();
      await bridgeWriter?.destroy();
      bridgeWriter = undefined;
      await credentials.close();
      if (ownsDb) await db.destroy();
      return { cut };
    },
  };
}

export type App = ReturnType<typeof createApp>;
