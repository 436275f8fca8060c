/**
 * The app factory: takes config and dependencies, returns `{ app, start, stop }`. Wiring only: the
 * store, the broker, the services, the HTTP API (http/api.ts), the MQTT bridge
 * (mqtt/service-bridge.ts) and the periodic work (periodic-work.ts), started and stopped in order.
 */
import type { Server } from 'node:http';
import type { AppDependencies, RunningApp, StoppedApp } from './app-dependencies.ts';
import { createCredentialStore, createServiceBroker, startServiceBroker } from './broker/service-broker.ts';
import { keepBrokerCredentialsInSync } from './cars/broker-credential-sync.ts';
import { systemClock } from './clock.ts';
import { createCommandMetrics } from './commands/command-metrics.ts';
import type { Config } from './config.ts';
import { createHttpApi } from './http/api.ts';
import { baseUrlFor } from './http/public-url.ts';
import { closeGracefully, listen } from './http/server.ts';
import { createLogger } from './logger.ts';
import { createMetrics, listenForMetrics } from './metrics.ts';
import { createBridgeHealth } from './mqtt/bridge-health.ts';
import { createServiceBridge } from './mqtt/service-bridge.ts';
import { schedulePeriodicWork } from './periodic-work.ts';
import { createScheduler } from './scheduler.ts';
import { createServices, prepareStore } from './services.ts';
import { openServiceStore } from './store/db.ts';
import { loadKeyRing } from './store/key-encryption.ts';
import { createWebhookMetrics } from './webhooks/webhook-metrics.ts';

export type { AppDependencies, RunningApp, StoppedApp } from './app-dependencies.ts';

export function createApp(config: Config, deps: AppDependencies = {}) {
  const logger = deps.logger ?? createLogger({ level: config.logLevel });
  const clock = deps.clock ?? systemClock;
  // First: a key-encryption key that cannot be had stops start-up before anything opens.
  const keyRing = deps.keyRing ?? loadKeyRing(config);
  const db = deps.db ?? openServiceStore(config, logger);
  let listeningUrl: string | undefined;
  const audience = (requestHost?: string) =>
    config.publicUrl ?? baseUrlFor(listeningUrl ?? `http://${config.host}:${config.port}`, requestHost);
  const metrics = createMetrics();
  const credentials = createCredentialStore(config, db, logger);
  const broker = createServiceBroker(config, { credentials, logger, registry: metrics.registry });
  const bridgeHealth = createBridgeHealth(metrics.registry);
  const base = { db, clock, logger };
  const services = createServices({
    ...base,
    config,
    audience,
    credentials,
    keyRing,
    bridgeHealth,
    broker: broker.accounts,
    passwords: deps.passwords,
    commandMetrics: createCommandMetrics(metrics.registry),
    webhookMetrics: createWebhookMetrics(metrics.registry),
  });
  const scheduler = createScheduler({ logger });
  schedulePeriodicWork(scheduler, services, {
    uploadLeaseSeconds: config.uploadLeaseSeconds,
    commandSweepSeconds: config.commandSweepSeconds,
    signingKeyCheckMs: deps.signingKeyCheckMs,
  });
  // The key-value store and the broker are rebuilt from SQL (a restore, a new Redis or Mosquitto).
  const credentialSync = keepBrokerCredentialsInSync({
    ...base,
    credentials,
    broker: broker.accounts,
    keyRing,
  });
  const bridge = createServiceBridge({
    ...base,
    writer: services.bridgeWriter,
    config,
    registry: metrics.registry,
    health: bridgeHealth,
    broker,
    commands: { lifecycle: services.commandLifecycle, outbox: services.commandOutbox },
    connection: deps.brokerConnection,
    telemetryBatch: deps.telemetryBatch,
    webhookEvents: services.webhookEvents,
  });
  const { docsDir, sdkScript, consoleDir } = deps;
  const http = createHttpApi({ config, services, logger, metrics, audience, docsDir, sdkScript, consoleDir });
  let server: Server | undefined;
  let metricsServer: Server | undefined;
  let stopped = false;

  return {
    app: http.app,
    services,
    broker,
    /** Where periodic work is declared (`scheduleTask`); it runs from `start` to `stop`. */
    scheduler,
    async start(): Promise<RunningApp> {
      // A bucket that is not there stops the start, first, rather than every upload after it.
      await services.packages.verify();
      const adminCodes = await prepareStore(db, services, logger);
      // Uploads whose receivers died (a crash, a kill) are let go, and their partial files deleted,
      // before the service listens; then the periodic work begins.
      await services.uploads.sweep();
      scheduler.start();
      const mqttUrl = await startServiceBroker(broker, config);
      await credentialSync.start();
      // After the migrations, so that what cars report has its tables; commands wait in SQL until
      // the bridge connects, and the sweep expires them meanwhile.
      await services.webhookEvents.start(logger);
      services.commandOutbox.start();
      services.webhookDeliverer.start();
      await bridge.start(mqttUrl);
      ({ server, url: listeningUrl } = await listen(http.app, config));
      const forMetrics = await listenForMetrics(metrics, config.metricsHost, config.metricsPort);
      metricsServer = forMetrics.server;
      return {
        url: listeningUrl,
        metricsUrl: forMetrics.url,
        mqttUrl,
        mqttTlsUrl: broker.tlsUrl,
        adminCodes,
      };
    },
    /**
     * Makes the contract's validators in the background, once listening, so that no first request
     * of a path waits for its own; a service in a test leaves them to be made as requests come.
     */
    warm: (): Promise<void> => http.validators.warm(() => stopped),
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
      // The outbox, then the bridge, so that neither takes the broker's going for a fault to retry.
      const bridgeStopped = services.commandOutbox
        .stop()
        .then(() => bridge.stop())
        .then(() => broker.stop());
      const graceMs = config.shutdownGraceSeconds * 1000;
      const cut = server ? await closeGracefully(server, { graceMs, inFlight: http.inFlight, logger }) : 0;
      server = undefined;
      // Cut uploads release their URL and delete their partial file, and the bridge writes the
      // telemetry still waiting, before the store closes.
      await Promise.all([services.uploads.settled(), sweepsStopped, credentialSyncStopped, bridgeStopped]);
      await services.close();
      await credentials.close();
      if (!deps.db) await db.destroy();
      return { cut };
    },
  };
}

export type App = ReturnType<typeof createApp>;
