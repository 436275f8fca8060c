/**
 * The MQTT bridge (DESIGN §9): what every car publishes, taken from the broker into the store, and
 * the commands sent the other way. Three parts, composed here:
 *
 * - the transport (connection.ts): the bridge's connection to the broker, subscribed to what every
 *   car publishes, and the command publisher's connection;
 * - the dispatch (dispatch.ts): each message read against the contract and run through its
 *   handler, waiting out store outages; what became of it counted and logged;
 * - the intake (intake/): what each message means, one handler per topic suffix, calling the
 *   services of cars/ and commands/.
 */
import { createCarReportService } from '../cars/car-report-service.ts';
import {
  createTelemetryBatch,
  defaultTelemetryBatch,
  type TelemetryBatchOptions,
} from '../cars/telemetry-batch.ts';
import type { Clock } from '../clock.ts';
import type { Logger } from '../logger.ts';
import type { Db } from '../store/db.ts';
import type { WebhookEvents } from '../webhooks/webhook-events.ts';
import type { BridgeHealth } from './bridge-health.ts';
import type { BridgeMetrics } from './bridge-metrics.ts';
import { type BrokerConnection, type ConnectionEvents, createBridgeConnection } from './connection.ts';
import { createDispatch } from './dispatch.ts';
import { type CommandIntake, createIntake } from './intake/index.ts';

export type { BrokerConnection } from './connection.ts';

/** What the bridge tells the commands (command-service.ts, command-outbox.ts). */
export interface BridgeCommands extends CommandIntake, ConnectionEvents {}

export interface BridgeDependencies {
  connection: BrokerConnection;
  commands: BridgeCommands;
  /** The store: telemetry batches are written through its pool, in the background. */
  db: Db;
  /**
   * Where each message the bridge takes one at a time is written (status, presence; the commands'
   * acknowledgements likewise): on Postgres a connection of its own, so that a write which paces
   * every car's stream never waits behind the requests for one of the pool's (bench:commands: a
   * second and more per command at 100 commands a second). Default `db`.
   */
  writer?: Db;
  clock: Clock;
  logger: Logger;
  metrics: BridgeMetrics;
  /** Where the bridge says whether its connections are up and subscribed (metrics, /readyz). */
  health?: BridgeHealth;
  telemetryBatch?: TelemetryBatchOptions;
  /** Where a car's presence changes become `car.online` / `car.offline` events. */
  webhookEvents?: WebhookEvents;
}

/**
 * Where the bridge signs in as the service (`credential`, the broker's service account): the
 * broker of this process at `url` (MQTT 3.1.1), or Mosquitto (MQTT_URL: MQTT 5, the replicas
 * sharing the stream).
 */
export function serviceBrokerConnection(
  config: { mqttUrl?: string; mqttCa?: Buffer; replicaId: string },
  credential: { username: string; password: string },
  url: string,
): BrokerConnection {
  const { username, password } = credential;
  // The broker takes the service's clients only under its user name. The same at every start
  // of this replica, so that it takes back its session (connection.ts); another replica's differs.
  const clientId = `${username}/bridge-${config.replicaId}`;
  return config.mqttUrl
    ? {
        url: config.mqttUrl,
        username,
        password,
        clientId,
        protocolVersion: 5,
        shared: true,
        ca: config.mqttCa,
      }
    : { url, username, password, clientId, protocolVersion: 4 };
}

export function createBridge(deps: BridgeDependencies) {
  const { db, clock, logger, metrics, commands } = deps;
  const carReports = createCarReportService({ db: deps.writer ?? db, webhookEvents: deps.webhookEvents });
  const telemetry = createTelemetryBatch({
    db,
    logger,
    metrics: {
      stored: (count) => metrics.counted('telemetry', 'stored', count),
      dropped: (reason, count) => metrics.dropped('telemetry', reason, count),
    },
    options: deps.telemetryBatch ?? defaultTelemetryBatch,
  });
  const dispatcher = createDispatch({
    handlers: createIntake({ carReports, telemetry, commands, clock }),
    clock,
    logger,
    metrics,
  });
  const connection = createBridgeConnection({
    connection: deps.connection,
    dispatch: dispatcher.dispatch,
    events: commands,
    logger,
    health: deps.health,
  });

  return {
    /** Where the command outbox publishes. */
    publisher: connection.publisher,

    /** Resolves once the bridge is connected and subscribed and the publisher connected; rejects (and gives up) when a first attempt fails. */
    start: (): Promise<void> => connection.start(),

    /** Disconnects, then writes the telemetry still waiting; a store outage is not waited out. */
    async stop(): Promise<void> {
      dispatcher.stop();
      await connection.stop();
      await telemetry.close();
    },
  };
}

export type Bridge = ReturnType<typeof createBridge>;
