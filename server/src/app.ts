/**
 * The app factory: takes config and dependencies, returns `{ app, start, stop }`. Wiring only: the
 * store, the broker, the services, the HTTP API (http/api.ts), the MQTT bridge and the periodic
 * work (periodic-work.ts), started and stopped in order.
 */

import type { Server } from 'node:http';
import type { AdminCode } from './accounts/admin-codes.ts';
import type { Passwords } from './accounts/passwords.ts';
import type { ServiceBroker } from './broker/broker.ts';
import { createBrokerMetrics } from './broker/broker-metrics.ts';
import { createRedisCredentialStore, createSqlCredentialStore } from './broker/credentials.ts';
import { createEmbeddedBroker } from './broker/embedded-broker.ts';
import { createMosquittoBroker } from './broker/mosquitto-dynsec.ts';
import { keepBrokerCredentialsInSync } from './cars/broker-credential-sync.ts';
import { connectedCarsOfReplica } from './cars/connected-cars.ts';
import type { TelemetryBatchOptions } from './cars/telemetry-batch.ts';
import { type Clock, systemClock } from './clock.ts';
import { createCommandMetrics } from './commands/command-metrics.ts';
import type { Config } from './config.ts';
import { createHttpApi } from './http/api.ts';
import { baseUrlFor } from './http/public-url.ts';
import { closeGracefully, listen } from './http/server.ts';
import { ListenError } from './listen-error.ts';
import { createLogger, type Logger } from './logger.ts';
import { createMetrics, listenForMetrics } from './metrics.ts';
import { type Bridge, type BrokerConnection, createBridge, serviceBrokerConnection } from './mqtt/bridge.ts';
import { createBridgeHealth } from './mqtt/bridge-health.ts';
import { createBridgeMetrics } from './mqtt/bridge-metrics.ts';
import { schedulePeriodicWork } from './periodic-work.ts';
import { createScheduler } from './scheduler.ts';
import { createServices } from './services.ts';
import { type Db, embeddedDbDir, openOwnConnection, openStore, storeOpened } from './store/db.ts';
import { type KeyRing, loadKeyRing } from './store/key-encryption.ts';
import { migrate } from './store/migrator.ts';

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

export interface StoppedApp {
  /** Requests still running at the end of the shutdown grace, and cut. */
  cut: number;
}

export function createApp(config: Config, deps: AppDependencies = {}) {
  const logger = deps.logger ?? createLogger({ level: config.logLevel });
  const clock = deps.clock ?? systemClock;
  const scheduler = createScheduler({ logger });
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
  const { app, inFlight, validators } = createHttpApi({
    config,
    services,
    logger,
    metrics,
    audience,
    docsDir: deps.docsDir,
    sdkScript: deps.sdkScript,
    consoleDir: deps.consoleDir,
  });

  let server: Server | undefined;
  let stopped = false;
  let metricsServer: Server | undefined;
  schedulePeriodicWork(scheduler, services, {
    uploadLeaseSeconds: config.uploadLeaseSeconds,
    commandSweepSeconds: config.commandSweepSeconds,
    signingKeyCheckMs: deps.signingKeyCheckMs,
  });
  // The key-value store and the broker are rebuilt from SQL (after a restore, a new Redis or a new
  // Mosquitto).
  const credentialSync = keepBrokerCredentialsInSync({
    db,
    clock,
    credentials,
    broker: broker.accounts,
    keyRing,
    logger,
  });

  return {
    app,
    services,
    broker,
    /** Where periodic work is declared (`scheduleTask`); it runs from `start` to `stop`. */
    scheduler,
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
      // before the service listens; then the periodic work begins (periodic-work.ts).
      await services.uploads.sweep();
      scheduler.start();
      let mqttUrl: string;
      try {
        mqttUrl = await broker.start();
      } catch (error) {
        if (config.mqttUrl) throw error;
        const tls = (error as { listener?: string } | undefined)?.listener === 'MQTT_TLS';
        throw new ListenError(tls ? 'MQTT_TLS' : 'MQTT', error);
      }
      await credentialSync.start();
      // After the migrations, so that what cars report has its tables.
      // Commands wait in SQL until the bridge connects; the sweep expires them meanwhile.
      services.commandOutbox.start();
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
      ({ server, url: listeningUrl } = await listen(app, config));
      const metricsListener = await listenForMetrics(metrics, config.metricsHost, config.metricsPort);
      metricsServer = metricsListener.server;
      const metricsUrl = metricsListener.url;
      return { url: listeningUrl, metricsUrl, mqttUrl, mqttTlsUrl: broker.tlsUrl, adminCodes };
    },
    /**
     * Makes the contract's validators in the background, once listening, so that no first request
     * of a path waits for its own; a service in a test leaves them to be made as requests come.
     */
    warm(): Promise<void> {
      return validators.warm(() => stopped);
    },
    /**
     * Stops taking connections and lets requests in flight finish for up to the shutdown grace;
     * then answers those still running 503 and closes their connections (a cut upload lets its URL
     * go and deletes its partial file), closes the broker (or the service's connection to it),
     * and closes the store.
     */
    async stop(): Promise<StoppedApp> {
      stopped = true;
      const sweepsStopped = scheduler.stop();
      const credentialSyncStopped = credentialSync.stop();
      metricsServer?.close();
      metricsServer = undefined;
      // The outbox, then the bridge, so that neither takes the broker's going for a fault to retry.
      const bridgeStopped = services.commandOutbox
        .stop()
        .then(() => bridge?.stop())
        .then(() => broker.stop());
      let cut = 0;
      if (server) {
        cut = await closeGracefully(server, {
          graceMs: config.shutdownGraceSeconds * 1000,
          inFlight,
          logger,
        });
        server = undefined;
      }
      // Cut uploads release their URL and delete their partial file, and the bridge writes the
      // telemetry still waiting, before the store closes.
      await Promise.all([services.uploads.settled(), sweepsStopped, credentialSyncStopped, bridgeStopped]);
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
