/**
 * The MQTT bridge (DESIGN §9): one mqtt.js client subscribed to what every car publishes, a
 * dispatch table from topic suffix to handler, and the store behind it. Each message is read
 * against the contract first (car-message.ts); one that fails is dropped, logged with the
 * redacted device id and counted by reason. A handler that throws is caught, logged and counted
 * the same way: nothing a car sends can stop the bridge.
 *
 * Messages are taken one at a time, so one car's messages are handled in the order it sent them
 * (presence: the last one wins). A QoS 1 message is acknowledged once handled; for status and
 * telemetry that means taken into a batch (status-batch.ts, telemetry-batch.ts), written within a
 * fraction of a second and on stop. mqtt.js takes the next message only after acknowledging this
 * one, so waiting for each status's own commit held the whole stream to one commit at a time: a
 * fleet outran it and Mosquitto dropped the QoS 1 messages queued beyond its limit (bench:ingest).
 * The price: a crash loses the reports of the batch being gathered (at most `maxDelayMs` of them).
 */
import { randomBytes } from 'node:crypto';
import { redactDeviceId } from '@svc/sdk';
import mqtt, { type IClientOptions, type IPublishPacket, type MqttClient } from 'mqtt';
import {
  type CarTopicPayloads,
  carTopicFilter,
  carTopicQos,
  type ServiceReceivedSuffix,
  serviceReceives,
} from '../../../generated/mqtt.ts';
import { markSeen, savePresence } from '../cars/car-report-repository.ts';
import type { Clock } from '../clock.ts';
import type { Logger } from '../logger.ts';
import type { Db } from '../store/db.ts';
import type { BridgeMetrics } from './bridge-metrics.ts';
import { readCarMessage } from './car-message.ts';
import { createStatusBatch, defaultStatusBatch, type StatusBatchOptions } from './status-batch.ts';
import {
  createTelemetryBatch,
  defaultTelemetryBatch,
  type TelemetryBatchOptions,
} from './telemetry-batch.ts';

/** Where the bridge signs in: the embedded broker's service account, or Mosquitto's. */
export interface BrokerConnection {
  url: string;
  username: string;
  password: string;
  /**
   * MQTT 5 (Mosquitto, EMQX) or 3.1.1 (the embedded aedes). Default 4 (3.1.1).
   * With 5 the session outlives a short disconnection (`sessionExpiryInterval`).
   */
  protocolVersion?: 4 | 5;
  /** Subscribe as `$share/svc/<filter>`, so that the replicas split the stream (MQTT 5 brokers). */
  shared?: boolean;
  /** Unique per replica; by default a random one per start. */
  clientId?: string;
}

export interface BridgeDependencies {
  connection: BrokerConnection;
  db: Db;
  clock: Clock;
  logger: Logger;
  metrics: BridgeMetrics;
  telemetryBatch?: TelemetryBatchOptions;
  statusBatch?: StatusBatchOptions;
}

/** What a handler did with a valid message: kept it, kept nothing, found no such car, or queued it. */
type Handled = 'stored' | 'ignored' | 'unknown_car' | 'queued';

type Handler<S extends ServiceReceivedSuffix> = (
  deviceId: string,
  payload: CarTopicPayloads[S],
  /** When the service saw the car: now for a live message, undefined for a retained replay. */
  seenAt: Date | undefined,
) => Promise<Handled>;

const sessionExpirySeconds = 3600;

export function createBridge(deps: BridgeDependencies) {
  const { connection, db, clock, logger, metrics } = deps;
  const telemetry = createTelemetryBatch({
    db,
    logger,
    metrics,
    options: deps.telemetryBatch ?? defaultTelemetryBatch,
  });
  const statuses = createStatusBatch({
    db,
    logger,
    metrics,
    options: deps.statusBatch ?? defaultStatusBatch,
  });

  const handlers: { [S in ServiceReceivedSuffix]: Handler<S> } = {
    status: async (deviceId, report, seenAt) => {
      await statuses.add({
        deviceId,
        hostVersion: report.host_version,
        installedApps: report.installed_apps,
        state: report.state,
        reportedAt: report.reported_at,
        receivedAt: clock(),
        seenAt,
      });
      return 'queued';
    },
    telemetry: async (deviceId, fix, seenAt) => {
      const receivedAt = (seenAt ?? clock()).toISOString();
      await telemetry.add({
        device_id: deviceId,
        recorded_at: fix.recorded_at,
        received_at: receivedAt,
        latitude: fix.location.latitude,
        longitude: fix.location.longitude,
        accuracy_m: fix.location.accuracy_m ?? null,
        heading_deg: fix.location.heading_deg ?? null,
        speed_kmh: fix.location.speed_kmh ?? null,
        odometer_km: fix.odometer_km ?? null,
        battery_percent: fix.battery_percent ?? null,
        live: seenAt !== undefined,
      });
      return 'queued';
    },
    presence: async (deviceId, presence, seenAt) => {
      const saved = await savePresence(db, { deviceId, online: presence.state === 'online' }, seenAt);
      return saved ? 'stored' : 'unknown_car';
    },
    // Commands come with issue 13: until then an acknowledgement is checked and counted, and
    // shows only that the car was there.
    'cmd/ack': async (deviceId, _ack, seenAt) => {
      const known = seenAt ? await markSeen(db, deviceId, seenAt) : true;
      return known ? 'ignored' : 'unknown_car';
    },
  };

  async function dispatch(packet: IPublishPacket): Promise<void> {
    const read = readCarMessage(packet.topic, packet.payload as Buffer);
    if (!read.ok) {
      metrics.dropped(read.suffix ?? 'unknown', read.reason);
      logger.warn('mqtt: message dropped', {
        reason: read.reason,
        suffix: read.suffix,
        device: read.deviceId === undefined ? undefined : redactDeviceId(read.deviceId),
        detail: read.detail,
      });
      return;
    }
    const { suffix, deviceId, payload } = read.message;
    // A retained message replayed on subscribing says what the car said some time ago, not that
    // it is there now (MQTT sets `retain` only on such replays).
    const seenAt = packet.retain ? undefined : clock();
    try {
      const handle = handlers[suffix] as Handler<typeof suffix>;
      const handled = await handle(deviceId, payload, seenAt);
      if (handled === 'unknown_car') {
        metrics.dropped(suffix, 'unknown_car');
        logger.warn('mqtt: message of a car not provisioned dropped', {
          reason: 'unknown_car',
          suffix,
          device: redactDeviceId(deviceId),
        });
      } else if (handled !== 'queued') {
        metrics.counted(suffix, handled);
      }
    } catch (error) {
      metrics.dropped(suffix, 'handler_failed');
      logger.error('mqtt: a message could not be handled', {
        reason: 'handler_failed',
        suffix,
        device: redactDeviceId(deviceId),
        error: error instanceof Error ? error.message : String(error),
      });
    }
  }

  const filters = serviceReceives.map((suffix) => ({
    filter: `${connection.shared ? '$share/svc/' : ''}${carTopicFilter(suffix)}`,
    qos: carTopicQos[suffix],
  }));

  async function subscribe(client: MqttClient): Promise<void> {
    const granted = await client.subscribeAsync(
      Object.fromEntries(filters.map(({ filter, qos }) => [filter, { qos }])),
    );
    // 128 (3.1.1) or a reason code of 0x80 and up (5): the broker refused the subscription.
    const refused = granted.filter((grant) => grant.qos >= 0x80).map((grant) => grant.topic);
    if (refused.length > 0) {
      throw new Error(`the broker refused the bridge's subscriptions to ${refused.join(', ')}`);
    }
  }

  let client: MqttClient | undefined;
  // The message being handled (one at a time), so that stop waits for it before the store closes.
  let handling: Promise<void> = Promise.resolve();

  return {
    /** Resolves once connected and subscribed; rejects (and gives up) when the first attempt fails. */
    start(): Promise<void> {
      const options: IClientOptions = {
        username: connection.username,
        password: connection.password,
        clientId: connection.clientId ?? `svc-bridge-${randomBytes(6).toString('hex')}`,
        protocolVersion: connection.protocolVersion ?? 4,
        // A session of its own, so that QoS 1 messages wait for the bridge while it reconnects.
        clean: false,
        ...(connection.protocolVersion === 5
          ? { properties: { sessionExpiryInterval: sessionExpirySeconds } }
          : {}),
        // Subscriptions are made again below whenever the broker kept no session.
        resubscribe: false,
        reconnectPeriod: 1000,
      };
      const started = mqtt.connect(connection.url, options);
      client = started;
      started.handleMessage = (packet, done) => {
        handling = dispatch(packet).then(() => done());
      };
      return new Promise((resolve, reject) => {
        let up = false;
        started.on('connect', (connack) => {
          const subscribed = connack.sessionPresent ? Promise.resolve() : subscribe(started);
          subscribed.then(
            () => {
              // Start-up says where the broker is; a reconnection is news for the operator.
              const log = up ? logger.info : logger.debug;
              log.call(logger, 'mqtt: bridge connected', { resubscribed: !connack.sessionPresent });
              if (!up) {
                up = true;
                resolve();
              }
            },
            (error: Error) => {
              logger.error('mqtt: bridge could not subscribe', { error: error.message });
              if (!up) {
                started.end(true);
                reject(error);
              }
            },
          );
        });
        started.on('error', (error) => {
          if (!up) {
            started.end(true);
            reject(new Error(`the MQTT bridge could not connect to the broker: ${error.message}`));
          } else {
            logger.warn('mqtt: bridge connection error', { error: error.message });
          }
        });
        started.on('offline', () => logger.warn('mqtt: bridge offline, reconnecting'));
      });
    },

    /** Disconnects, then writes the status reports and telemetry still waiting. */
    async stop(): Promise<void> {
      await client?.endAsync();
      client = undefined;
      await handling;
      await Promise.all([statuses.flush(), telemetry.flush()]);
    },
  };
}

export type Bridge = ReturnType<typeof createBridge>;
