/**
 * The service's own bridge, as a replica runs it: signed in to its broker as the service, writing
 * what cars say on a store connection of its own, telling the command outbox what happens and
 * handing it the publisher's connection. Started once the broker and the outbox are, stopped
 * after the outbox.
 */
import type { Registry } from 'prom-client';
import { connectedCarsOfReplica } from '../cars/connected-cars.ts';
import type { TelemetryBatchOptions } from '../cars/telemetry-batch.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Logger } from '../logger.ts';
import type { Db } from '../store/db.ts';
import type { WebhookEvents } from '../webhooks/webhook-events.ts';
import { type Bridge, type BrokerConnection, createBridge, serviceBrokerConnection } from './bridge.ts';
import type { BridgeHealth } from './bridge-health.ts';
import { createBridgeMetrics } from './bridge-metrics.ts';
import type { Publisher } from './connection.ts';
import type { CommandIntake } from './intake/services.ts';

/** What the bridge asks of the commands (commands/command-lifecycle.ts, command-outbox.ts). */
export interface BridgedCommands {
  lifecycle: Pick<CommandIntake, 'acknowledge'>;
  outbox: {
    attach(publisher: Publisher): void;
    carOnline(deviceId: string): void;
    brokerConnected(): void;
    wake(): void;
  };
}

/** The broker this process runs (embedded), or one outside it (Mosquitto). */
export interface BridgedBroker {
  serviceCredential: { username: string; password: string };
  signedInCars?(): number;
}

export function createServiceBridge(deps: {
  config: Pick<Config, 'mqttUrl' | 'mqttCa' | 'replicaId'>;
  db: Db;
  /** Where what cars say is written, one message at a time (`writer` in bridge.ts). */
  writer: Db;
  clock: Clock;
  logger: Logger;
  registry: Registry;
  health: BridgeHealth;
  broker: BridgedBroker;
  commands: BridgedCommands;
  /** Another broker to sign in to (tests); by default the service's. */
  connection?: BrokerConnection;
  telemetryBatch?: TelemetryBatchOptions;
  webhookEvents?: WebhookEvents;
}) {
  const { config, db, broker, commands } = deps;
  const metrics = createBridgeMetrics(
    deps.registry,
    // A broker this process does not hold (MQTT_URL, or one given to the bridge) is counted from
    // the cars' presence in the store.
    connectedCarsOfReplica(
      config.mqttUrl || deps.connection
        ? { broker: 'external', db, replicaId: config.replicaId }
        : { broker: 'embedded', signedInCars: () => broker.signedInCars?.() ?? 0 },
    ),
  );
  let bridge: Bridge | undefined;

  return {
    /** Signs in to the broker at `mqttUrl` (the embedded one's, or MQTT_URL) and subscribes. */
    async start(mqttUrl: string): Promise<void> {
      bridge = createBridge({
        connection: deps.connection ?? serviceBrokerConnection(config, broker.serviceCredential, mqttUrl),
        commands: {
          acknowledge: commands.lifecycle.acknowledge,
          carOnline: commands.outbox.carOnline,
          brokerConnected: commands.outbox.brokerConnected,
          publisherConnected: commands.outbox.wake,
        },
        db,
        writer: deps.writer,
        clock: deps.clock,
        logger: deps.logger,
        metrics,
        health: deps.health,
        telemetryBatch: deps.telemetryBatch,
        webhookEvents: deps.webhookEvents,
      });
      commands.outbox.attach(bridge.publisher);
      await bridge.start();
    },

    /** Disconnects and writes the telemetry still waiting. */
    stop: async (): Promise<void> => bridge?.stop(),
  };
}
