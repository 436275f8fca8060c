/**
 * The MQTT bridge (DESIGN §9): one mqtt.js client subscribed to what every car publishes, a
 * dispatch table from topic suffix to handler, and the store behind it. Each message is read
 * against the contract first (car-message.ts); one that fails is dropped, logged with the
 * redacted device id and counted by reason. A handler that throws is caught, logged and counted
 * the same way: nothing a car sends can stop the bridge.
 *
 * Messages are taken one at a time and a QoS 1 message is acknowledged only once handled, so the
 * broker keeps (and redelivers) what the service has not stored yet, and one car's messages are
 * handled in the order it sent them. While the store is unavailable the message in hand is tried
 * again after a pause (store-outage.ts), which holds the stream back rather than dropping it.
 *
 * The commands of the outbox (command-outbox.ts) go out on a second connection, the publisher's:
 * mqtt.js reads what the broker sends on a connection only between the messages it hands over, so
 * on the bridge's own connection each PUBACK waited behind every message the bridge had still to
 * handle, and a bridge behind on its messages held every command back (bench:commands: a second and
 * more per command at 100 commands a second on Postgres). The bridge tells the outbox when it
 * connects and when a car says `online`, and moves commands as the cars' `cmd/ack` say.
 *
 * The bridge signs in under a client id that is the same at every start of the replica
 * (`connection.clientId`, from SVC_REPLICA_ID) with a session the broker keeps for an hour: a
 * restarted replica takes back its session and what the broker queued in it meanwhile. It
 * subscribes on every connection, session kept or not (see `subscribeOn`), and stands down when
 * another client takes its client id, rather than taking it back every second.
 */
import { redactDeviceId } from '@svc/sdk';
import mqtt, { type IClientOptions, type IPublishPacket, type MqttClient } from 'mqtt';
import {
  type CarCommandAck,
  type CarTopicPayloads,
  carTopicFilter,
  carTopicQos,
  carTopicRetain,
  type ServiceReceivedSuffix,
  serviceReceives,
} from '../../../generated/mqtt.ts';
import { savePresence, saveStatusReport } from '../cars/car-report-repository.ts';
import {
  createTelemetryBatch,
  defaultTelemetryBatch,
  type TelemetryBatchOptions,
} from '../cars/telemetry-batch.ts';
import type { Clock } from '../clock.ts';
import type { AckHandled } from '../commands/command-lifecycle.ts';
import type { CommandPublisher } from '../commands/command-outbox.ts';
import type { Logger } from '../logger.ts';
import type { Db } from '../store/db.ts';
import type { BridgeHealth } from './bridge-health.ts';
import type { BridgeMetrics } from './bridge-metrics.ts';
import { readCarMessage } from './car-message.ts';
import { createStoreOutage, StoreOutageError } from './store-outage.ts';

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
  /**
   * The same at every start of one replica, and never used by another (two would take the
   * session from each other): the broker keeps the bridge's session under it. Default
   * `<username>/bridge-main`, for a service of one replica.
   */
  clientId?: string;
  /** The certificate authorities the broker's certificate must chain to (`mqtts://`, MQTT_CA). */
  ca?: Buffer;
}

/** What the bridge tells the commands (command-service.ts, command-outbox.ts). */
export interface BridgeCommands {
  /** A car's valid acknowledgement of one of its commands; a live one also says the car was seen. */
  acknowledge(
    deviceId: string,
    ack: CarCommandAck,
    seenAt: Date | undefined,
  ): Promise<AckHandled | 'unknown_car'>;
  /** A car said `online`: it gets again what it has not finished. Must not wait for the broker. */
  carOnline(deviceId: string): void;
  /** The bridge connected (again) and subscribed. */
  brokerConnected(): void;
  /** The publisher's connection (re)connected: what waits may go out. */
  publisherConnected(): void;
}

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
}

/**
 * What a handler did with a valid message: kept it, kept nothing, found no such car, queued it, or
 * found it acknowledged a command the car was never sent.
 */
type Handled = 'stored' | 'ignored' | 'unknown_car' | 'queued' | 'unknown_command' | 'command_of_another_car';

type Handler<S extends ServiceReceivedSuffix> = (
  deviceId: string,
  payload: CarTopicPayloads[S],
  /** When the service saw the car: now for a live message, undefined for a retained replay. */
  seenAt: Date | undefined,
) => Promise<Handled>;

/**
 * How long the broker keeps the bridge's session, and queues the cars' QoS 1 messages in it, while
 * the replica is away (a restart, an upgrade, a crash). A replica gone for good leaves what the
 * broker queued for it there until then (docs/adr/0039-replicas-and-broker-sessions.md).
 */
const sessionExpirySeconds = 3600;

/** MQTT 5 DISCONNECT reason 0x8E: another client connected with this client id. */
const sessionTakenOver = 0x8e;

/** MQTT 5 PUBACK reason 0x87: the broker does not let this client publish there. */
const notAuthorized = 0x87;

/** How soon a refused or failed subscription is asked for again on the same connection. */
const resubscribeMs = 1000;

/**
 * Connections the broker closes this soon after they began, this many in a row, are most likely
 * two clients with one client id throwing each other off: Mosquitto before 2.0.15 says nothing
 * of a session taken over (it sends no DISCONNECT 0x8E), it just closes the connection.
 */
const shortConnectionMs = 5000;
const shortConnectionsInARow = 3;

export function createBridge(deps: BridgeDependencies) {
  const { connection, db, clock, logger, metrics, commands } = deps;
  const health = deps.health;
  const writer = deps.writer ?? db;
  const telemetry = createTelemetryBatch({
    db,
    logger,
    metrics,
    options: deps.telemetryBatch ?? defaultTelemetryBatch,
  });
  const outage = createStoreOutage({ logger });

  const handlers: { [S in ServiceReceivedSuffix]: Handler<S> } = {
    status: async (deviceId, report, seenAt) => {
      const saved = await saveStatusReport(
        writer,
        {
          deviceId,
          hostVersion: report.host_version,
          installedApps: report.installed_apps,
          state: report.state,
          reportedAt: report.reported_at,
          receivedAt: clock(),
        },
        seenAt,
      );
      return saved ? 'stored' : 'unknown_car';
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
      const online = presence.state === 'online';
      const saved = await savePresence(writer, { deviceId, online, at: presence.at }, seenAt);
      // A car that connects says so after subscribing to its `cmd` (the contract): what it missed
      // while away goes out again. A retained replay is no news: the bridge's own connection
      // (re)sends everything then.
      if (saved && online && seenAt) commands.carOnline(deviceId);
      return saved ? 'stored' : 'unknown_car';
    },
    'cmd/ack': (deviceId, ack, seenAt) => commands.acknowledge(deviceId, ack, seenAt),
  };

  /** Whether to acknowledge the message: not when the bridge stopped before the store came back. */
  async function dispatch(packet: IPublishPacket): Promise<boolean> {
    const read = readCarMessage(packet.topic, packet.payload as Buffer, clock());
    if (!read.ok) {
      metrics.dropped(read.suffix ?? 'unknown', read.reason);
      logger.warn('mqtt: message dropped', {
        reason: read.reason,
        suffix: read.suffix,
        device: read.deviceId === undefined ? undefined : redactDeviceId(read.deviceId),
        detail: read.detail,
      });
      return true;
    }
    const { suffix, deviceId, payload } = read.message;
    // A retained message replayed on subscribing says what the car said some time ago, not that
    // it is there now (MQTT sets `retain` only on such replays).
    const seenAt = packet.retain ? undefined : clock();
    try {
      const handle = handlers[suffix] as Handler<typeof suffix>;
      const handled = await outage.persist(() => handle(deviceId, payload, seenAt));
      if (handled === 'unknown_car') {
        metrics.dropped(suffix, 'unknown_car');
        logger.warn('mqtt: message of a car not provisioned dropped', {
          reason: 'unknown_car',
          suffix,
          device: redactDeviceId(deviceId),
        });
      } else if (handled === 'unknown_command' || handled === 'command_of_another_car') {
        metrics.dropped(suffix, handled);
        logger.warn('mqtt: an acknowledgement of a command this car was not sent dropped', {
          reason: handled,
          suffix,
          device: redactDeviceId(deviceId),
        });
      } else if (handled !== 'queued') {
        metrics.counted(suffix, handled);
      }
    } catch (error) {
      if (error instanceof StoreOutageError) {
        metrics.dropped(suffix, 'store_unavailable');
        logger.warn('mqtt: a message was not stored: the bridge stopped during a store outage', {
          reason: 'store_unavailable',
          suffix,
          device: redactDeviceId(deviceId),
        });
        return false;
      }
      metrics.dropped(suffix, 'handler_failed');
      logger.error('mqtt: a message could not be handled', {
        reason: 'handler_failed',
        suffix,
        device: redactDeviceId(deviceId),
        error: error instanceof Error ? error.message : String(error),
      });
    }
    return true;
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
    if (connection.shared) await readRetained(client);
  }

  /**
   * MQTT 5 (4.8.2) has a broker send no retained messages to a shared subscription (Mosquitto
   * 2.0.11 sends them anyway; a broker that follows the spec does not), so what cars left retained
   * (presence, status) while no bridge listened is read once, plainly: subscribed and unsubscribed at once, the broker
   * having queued them on subscribing. Reading them twice, or on every replica, does no harm:
   * presence is ordered by `at`, and a status replaces itself.
   */
  async function readRetained(client: MqttClient): Promise<void> {
    const retained = serviceReceives.filter((suffix) => carTopicRetain[suffix]).map((s) => carTopicFilter(s));
    await client.subscribeAsync(retained, { qos: 1 });
    await client.unsubscribeAsync(retained);
  }

  let client: MqttClient | undefined;
  /** The connection the outbox publishes on. */
  let publishing: MqttClient | undefined;
  // The message being handled (one at a time), so that stop waits for it before the store closes.
  let handling: Promise<void> = Promise.resolve();
  /** Publications waiting for their PUBACK, failed at once when the connection closes. */
  const awaitingPuback = new Set<(error: Error) => void>();

  /** The outbox publishes on a connection of its own (see above). */
  const publisher: CommandPublisher = {
    get connected() {
      return publishing?.connected ?? false;
    },
    publish(topic, payload) {
      const target = publishing;
      if (!target?.connected) {
        return Promise.reject(new Error('the command publisher is not connected to the broker'));
      }
      return new Promise<void>((resolve, reject) => {
        const fail = (error: Error) => {
          awaitingPuback.delete(fail);
          reject(error);
        };
        awaitingPuback.add(fail);
        target.publish(topic, payload, { qos: carTopicQos.cmd, retain: carTopicRetain.cmd }, (error) => {
          if (!awaitingPuback.delete(fail)) return;
          publishRefused((error as { code?: number } | undefined)?.code === notAuthorized);
          if (error) reject(error);
          else resolve();
        });
      });
    },
  };

  /**
   * A broker that refuses every command (the service's account lacks the `svc-bridge` role of
   * docs/operating.md, "The broker") leaves them all `queued` while the bridge looks well: said
   * once, in /readyz and in the log, until a publication is taken again.
   */
  let refusing = false;
  function publishRefused(refused: boolean): void {
    if (refused === refusing) return;
    refusing = refused;
    health?.publishRefused(refused);
    if (refused) {
      logger.error(
        'mqtt: the broker refuses the service\'s commands: give the service\'s account (MQTT_USERNAME) the svc-bridge role of docs/operating.md, "The broker"',
        { username: connection.username },
      );
    } else {
      logger.info("mqtt: the broker takes the service's commands again");
    }
  }

  const clientId = connection.clientId ?? `${connection.username}/bridge-main`;
  /** Set once another client took this replica's client id: neither connection comes back. */
  let takenOver = false;

  /**
   * Another process connected with this replica's client id (MQTT 5 says so in its DISCONNECT): a
   * newer start of this replica, or a second replica given the same SVC_REPLICA_ID. Taking it
   * back would have the two throw each other off every second; the newer one keeps it, this one
   * stops both its connections and says why. Its HTTP API keeps serving.
   */
  function standDown(what: 'bridge' | 'command publisher'): void {
    if (takenOver) return;
    takenOver = true;
    logger.error(
      "mqtt: another client connected with this replica's client id; this bridge stopped taking messages. " +
        'Unless this replica was just replaced by a newer start of it, two replicas have the same SVC_REPLICA_ID: give each its own',
      { client_id: clientId, connection: what },
    );
    client?.end(true);
    publishing?.end(true);
    health?.connected('messages', false);
    health?.connected('commands', false);
  }

  /**
   * The publisher's connection: a clean session that subscribes to nothing, so that mqtt.js reads
   * its PUBACKs as they come. Resolves once connected; rejects when the first attempt fails.
   */
  function startPublisher(): Promise<void> {
    const started = mqtt.connect(connection.url, {
      username: connection.username,
      password: connection.password,
      // The embedded broker takes the service's clients under its user name and `/`.
      clientId: `${clientId}/commands`,
      protocolVersion: connection.protocolVersion ?? 4,
      ...(connection.ca ? { ca: connection.ca } : {}),
      clean: true,
      reconnectPeriod: 1000,
    });
    publishing = started;
    // mqtt.js keeps an unacknowledged QoS 1 message to send again after reconnecting, and may
    // never call back: the outbox is told now, and publishes it again itself.
    started.on('close', () => {
      const cut = new Error('the connection to the broker closed before it took the message');
      for (const fail of [...awaitingPuback]) fail(cut);
    });
    return new Promise((resolve, reject) => {
      let up = false;
      started.on('connect', () => {
        if (up) logger.info('mqtt: command publisher connected');
        up = true;
        health?.connected('commands', true);
        commands.publisherConnected();
        resolve();
      });
      started.on('close', () => health?.connected('commands', false));
      reportTrouble(started, 'command publisher', () => up, reject);
    });
  }

  /**
   * Logs a connection's errors and drops once it is up; before that, its first error ends it and
   * fails its start (`reject`).
   */
  function reportTrouble(
    started: MqttClient,
    what: 'bridge' | 'command publisher',
    isUp: () => boolean,
    reject: (error: Error) => void,
  ): void {
    started.on('disconnect', (packet) => {
      if (packet.reasonCode === sessionTakenOver) standDown(what);
    });
    started.on('error', (error) => {
      if (!isUp()) {
        started.end(true);
        reject(new Error(`the MQTT ${what} could not connect to the broker: ${error.message}`));
      } else {
        logger.warn(`mqtt: ${what} connection error`, { error: error.message });
      }
    });
    started.on('offline', () => {
      if (!takenOver) logger.warn(`mqtt: ${what} offline, reconnecting`);
    });
  }

  /** The bridge's connection: resolves once connected and subscribed; rejects when the first attempt fails. */
  function startBridge(): Promise<void> {
    const options: IClientOptions = {
      username: connection.username,
      password: connection.password,
      clientId,
      protocolVersion: connection.protocolVersion ?? 4,
      ...(connection.ca ? { ca: connection.ca } : {}),
      // A session of its own, so that QoS 1 messages wait for the bridge while it reconnects.
      clean: false,
      ...(connection.protocolVersion === 5
        ? { properties: { sessionExpiryInterval: sessionExpirySeconds } }
        : {}),
      // Subscriptions are made below on every connection (see subscribeOn).
      resubscribe: false,
      reconnectPeriod: 1000,
    };
    const started = mqtt.connect(connection.url, options);
    client = started;
    started.handleMessage = (packet, done) => {
      handling = dispatch(packet).then((acknowledge) => {
        if (acknowledge) done();
      });
    };
    /** Counts the connections, so that a late answer to an old one's SUBSCRIBE changes nothing. */
    let connections = 0;
    let retry: NodeJS.Timeout | undefined;
    let connectedAt: number | undefined;
    let shortInARow = 0;
    started.on('close', () => {
      clearTimeout(retry);
      health?.connected('messages', false);
      if (connectedAt === undefined || started.disconnecting || takenOver) return;
      shortInARow = Date.now() - connectedAt < shortConnectionMs ? shortInARow + 1 : 0;
      connectedAt = undefined;
      if (shortInARow === shortConnectionsInARow) {
        logger.error(
          'mqtt: the broker keeps closing the bridge connection soon after it connects: another client probably uses its client id. ' +
            'Two replicas with the same SVC_REPLICA_ID do this: give each its own',
          { client_id: clientId, connections: shortInARow },
        );
      }
    });
    return new Promise((resolve, reject) => {
      let up = false;
      /**
       * Subscribes on every connection, whether or not the broker says it kept the session:
       * Mosquitto 2.0.11 restarted with `persistence true` restores the bridge's session
       * (`sessionPresent`) with `$share/svc/…` subscriptions that deliver nothing, so a bridge
       * that trusted the flag stored nothing more. Subscribing again replaces a subscription the
       * broker holds (MQTT 3.8.4): it costs one round trip per connection and never doubles one.
       */
      const subscribeOn = (connection: number, sessionPresent: boolean) => {
        subscribe(started).then(
          () => {
            if (connection !== connections || !started.connected) return;
            health?.subscribed(true);
            // Start-up says where the broker is; a reconnection is news for the operator.
            const log = up ? logger.info : logger.debug;
            log.call(logger, 'mqtt: bridge connected', { session_present: sessionPresent, subscribed: true });
            commands.brokerConnected();
            if (!up) {
              up = true;
              resolve();
            }
          },
          (error: Error) => {
            if (connection !== connections) return;
            logger.error('mqtt: bridge could not subscribe', { error: error.message });
            if (!up) {
              started.end(true);
              reject(error);
            } else if (started.connected) {
              // Connected and taking nothing helps no one: ask again until the broker grants it.
              retry = setTimeout(() => subscribeOn(connection, sessionPresent), resubscribeMs);
            }
          },
        );
      };
      started.on('connect', (connack) => {
        connections += 1;
        connectedAt = Date.now();
        health?.connected('messages', true);
        subscribeOn(connections, connack.sessionPresent);
      });
      reportTrouble(started, 'bridge', () => up, reject);
    });
  }

  return {
    /** Where the command outbox publishes. */
    publisher,

    /** Resolves once the bridge is connected and subscribed and the publisher connected; rejects (and gives up) when a first attempt fails. */
    async start(): Promise<void> {
      await startBridge();
      try {
        await startPublisher();
      } catch (error) {
        await client?.endAsync(true);
        throw error;
      }
    },

    /** Disconnects, then writes the telemetry still waiting; a store outage is not waited out. */
    async stop(): Promise<void> {
      outage.stop();
      await publishing?.endAsync();
      publishing = undefined;
      await client?.endAsync();
      client = undefined;
      await handling;
      await telemetry.close();
    },
  };
}

export type Bridge = ReturnType<typeof createBridge>;
