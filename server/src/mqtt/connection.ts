/**
 * The bridge's transport (DESIGN §9): one mqtt.js client subscribed to what every car publishes,
 * handing each message to `dispatch` (dispatch.ts), and a second connection the command outbox
 * publishes on. What a message means is not known here.
 *
 * A QoS 1 message is acknowledged only once `dispatch` says so (once stored), so the broker keeps
 * (and redelivers) what the service has not stored yet. mqtt.js hands a connection's next message
 * over only once the one before is acknowledged, so a connection has one message in hand at a time
 * and the store's round trip would pace the whole stream: on a broker whose replicas share the
 * stream (`$share/svc`, MQTT 5) the bridge takes it on many connections (`sharedLanes`), among
 * which the broker deals the messages, and what they hold at once is stored in one write
 * (store/group-write.ts). One car's messages may then be handled out of the order it sent them,
 * which is why what a car reports is ordered by the car's own times (docs/adr/0054).
 *
 * The commands of the outbox (command-outbox.ts) go out on a second connection, the publisher's:
 * mqtt.js reads what the broker sends on a connection only between the messages it hands over, so
 * on the bridge's own connection each PUBACK waited behind every message the bridge had still to
 * handle, and a bridge behind on its messages held every command back (bench:commands: a second and
 * more per command at 100 commands a second on Postgres). The connection tells the outbox when the
 * bridge connects and subscribes, and when the publisher connects (`ConnectionEvents`).
 *
 * Each of the bridge's connections signs in under a client id that is the same at every start of
 * the replica (`connection.clientId`, from SVC_REPLICA_ID, and the lane's number after the first)
 * with a session the broker keeps for an hour: a restarted replica takes back its sessions and
 * what the broker queued in them meanwhile. It subscribes on every connection, session kept or not
 * (see `subscribeOn`), and stands down when another client takes one of its client ids, rather
 * than taking it back every second.
 */
import mqtt, { type IClientOptions, type IPublishPacket, type MqttClient } from 'mqtt';
import {
  carTopicFilter,
  carTopicQos,
  carTopicRetain,
  type ServiceReceivedSuffix,
  serviceReceives,
} from '../../../generated/mqtt.ts';
import type { Logger } from '../logger.ts';
import type { BridgeHealth } from './bridge-health.ts';

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

/** What the connection tells the commands (command-outbox.ts). */
export interface ConnectionEvents {
  /** The bridge connected (again) and subscribed. */
  brokerConnected(): void;
  /** The publisher's connection (re)connected: what waits may go out. */
  publisherConnected(): void;
}

/** Where the command outbox publishes (its `CommandPublisher`). */
export interface Publisher {
  /** Whether a publication now can reach the broker. */
  readonly connected: boolean;
  /** Resolves once the broker took the message (QoS 1: its PUBACK); rejects if it did not. */
  publish(topic: string, payload: string): Promise<void>;
}

export interface BridgeConnectionDependencies {
  connection: BrokerConnection;
  /**
   * Handles one message; resolves whether to acknowledge it to the broker (not when the bridge
   * stopped before it could be stored). Called one message at a time per connection, so with
   * `sharedLanes` as many messages at once as there are connections.
   */
  dispatch(packet: IPublishPacket): Promise<boolean>;
  events: ConnectionEvents;
  logger: Logger;
  /** Where the bridge says whether its connections are up and subscribed (metrics, /readyz). */
  health?: BridgeHealth;
}

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

/**
 * The bridge's connections when the replicas share the cars' messages (`$share/svc`), by what they
 * take: a connection has one message in hand at a time, so each kind has connections of its own
 * and never waits behind another's writes. Not a setting: each connection is a session the broker
 * keeps for an hour, and one no longer used would go on receiving its share of the stream until its
 * session expired (docs/adr/0039). Without shared subscriptions (the embedded broker) every
 * subscriber receives everything, so there is one connection for all.
 *
 * - status and presence: what they hold at once is stored in one write (store/group-write.ts), so
 *   the more in hand, the larger the write; bench:fleet (10,000 cars) had every car `online` in
 *   53 s on 16 and 32 s on 64.
 * - acknowledgements: a command's round trip waited behind status reports waiting for their group
 *   (bench:fleet: 550 ms at the median before its write began).
 * - telemetry (QoS 0, written in batches, acknowledged to no one): it waited behind a status
 *   waiting for its group to commit (bench:ingest: the service 36% idle while it fell behind).
 */
const sharedLanes = [
  { takes: ['status', 'presence'], connections: 64 },
  { takes: ['cmd/ack'], connections: 16 },
  { takes: ['telemetry'], connections: 2 },
] as const satisfies readonly { takes: readonly ServiceReceivedSuffix[]; connections: number }[];

/** What each of the shared connections takes, by its number. */
const sharedLaneTakes: readonly (readonly ServiceReceivedSuffix[])[] = sharedLanes.flatMap(
  ({ takes, connections }) => Array.from({ length: connections }, () => takes),
);

/**
 * Retained replays taken ahead of their writes, at most: a fleet's replay all at once (20,000 for
 * 10,000 cars) took the service to 2.2 GiB (bench:fleet).
 */
const maxReplaysInHand = 1000;

/** How soon a refused or failed subscription is asked for again on the same connection. */
const resubscribeMs = 1000;

/**
 * Connections the broker closes this soon after they began, this many in a row, are most likely
 * two clients with one client id throwing each other off: Mosquitto before 2.0.15 says nothing
 * of a session taken over (it sends no DISCONNECT 0x8E), it just closes the connection.
 */
const shortConnectionMs = 5000;
const shortConnectionsInARow = 3;

export function createBridgeConnection(deps: BridgeConnectionDependencies) {
  const { connection, dispatch, events, logger } = deps;
  const health = deps.health;

  const filterOf = (suffix: (typeof serviceReceives)[number]) => ({
    filter: `${connection.shared ? '$share/svc/' : ''}${carTopicFilter(suffix)}`,
    qos: carTopicQos[suffix],
  });
  const laneCount = connection.shared ? sharedLaneTakes.length : 1;
  /** What each lane subscribes to: without shared subscriptions, everything on the one lane. */
  const filtersOf = (lane: number) =>
    (connection.shared ? (sharedLaneTakes[lane] ?? []) : serviceReceives).map(filterOf);

  async function subscribe(client: MqttClient, lane: number): Promise<void> {
    const filters = filtersOf(lane);
    const granted = await client.subscribeAsync(
      Object.fromEntries(filters.map(({ filter, qos }) => [filter, { qos }])),
    );
    // 128 (3.1.1) or a reason code of 0x80 and up (5): the broker refused the subscription.
    const refused = granted.filter((grant) => grant.qos >= 0x80).map((grant) => grant.topic);
    if (refused.length > 0) {
      throw new Error(`the broker refused the bridge's subscriptions to ${refused.join(', ')}`);
    }
    if (connection.shared && lane === 0) await readRetained(client);
    if (connection.shared) leaveOthers(client, filters);
  }

  /**
   * A lane's session may hold subscriptions of another lane's (the first lane's session, from before
   * the lanes, held them all): it leaves them, or it would take its share of those too. Not waited
   * for: the answer comes after the messages already on their way.
   */
  function leaveOthers(client: MqttClient, own: { filter: string }[]): void {
    const others = serviceReceives
      .map((suffix) => filterOf(suffix).filter)
      .filter((filter) => !own.some((mine) => mine.filter === filter));
    client.unsubscribeAsync(others).catch((error: Error) => {
      logger.debug("mqtt: a bridge connection could not leave another lane's subscriptions", {
        error: error.message,
      });
    });
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

  /** The connections the cars' messages arrive on, by lane. */
  const lanes: (MqttClient | undefined)[] = [];
  /** Which lanes are connected, and which of those subscribed: the bridge is up when all are. */
  const lanesUp = new Set<number>();
  const lanesSubscribed = new Set<number>();
  /** The connection the outbox publishes on. */
  let publishing: MqttClient | undefined;
  // The message each lane is handling, and the retained replays being stored, so that stop waits
  // for them before the store closes.
  const handling: Promise<void>[] = [];
  const replaying = new Set<Promise<boolean>>();
  /** Publications waiting for their PUBACK, failed at once when the connection closes. */
  const awaitingPuback = new Set<(error: Error) => void>();

  /** The outbox publishes on a connection of its own (see above). */
  const publisher: Publisher = {
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
  /** The first lane keeps the replica's client id, so that its session outlives an upgrade. */
  const laneClientId = (lane: number) => (lane === 0 ? clientId : `${clientId}/${lane}`);

  function laneConnected(lane: number, up: boolean): void {
    if (up) lanesUp.add(lane);
    else {
      lanesUp.delete(lane);
      lanesSubscribed.delete(lane);
    }
    health?.connected('messages', lanesUp.size === laneCount);
  }

  function laneSubscribed(lane: number): void {
    lanesSubscribed.add(lane);
    health?.subscribed(lanesSubscribed.size === laneCount);
  }
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
    for (const lane of lanes) lane?.end(true);
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
        events.publisherConnected();
        resolve();
      });
      started.on('close', () => health?.connected('commands', false));
      reportTrouble(started, 'command publisher', () => up, reject);
    });
  }

  /**
   * Logs a connection's errors and drops once it is up; before that, its first error ends it and
   * fails its start (`reject`). The bridge's lanes after the first log theirs at debug: a broker
   * restart is one warning, not one per lane.
   */
  function reportTrouble(
    started: MqttClient,
    what: 'bridge' | 'command publisher',
    isUp: () => boolean,
    reject: (error: Error) => void,
    lane = 0,
  ): void {
    const warn = lane === 0 ? logger.warn : logger.debug;
    started.on('disconnect', (packet) => {
      if (packet.reasonCode === sessionTakenOver) standDown(what);
    });
    started.on('error', (error) => {
      if (!isUp()) {
        started.end(true);
        reject(new Error(`the MQTT ${what} could not connect to the broker: ${error.message}`));
      } else {
        warn.call(logger, `mqtt: ${what} connection error`, { error: error.message });
      }
    });
    started.on('offline', () => {
      if (!takenOver) warn.call(logger, `mqtt: ${what} offline, reconnecting`);
    });
  }

  /**
   * One of the bridge's connections (`lane`): resolves once connected and subscribed; rejects when
   * the first attempt fails.
   */
  function startLane(lane: number): Promise<void> {
    const laneId = laneClientId(lane);
    const options: IClientOptions = {
      username: connection.username,
      password: connection.password,
      clientId: laneId,
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
    lanes[lane] = started;
    started.handleMessage = (packet, done) => {
      const handled = dispatch(packet);
      if (packet.retain && replaying.size < maxReplaysInHand) {
        // A retained message replayed on subscribing stays with the broker whatever becomes of it
        // here (a crash before it is stored replays it at the next start), so it is taken at once
        // and stored in the background: a fleet's replay (two per car) goes into the store in
        // groups instead of one round trip each, holding this connection's stream for minutes. Up to
        // `maxReplaysInHand` at once; beyond, one waits for its write as a live message does.
        replaying.add(handled);
        void handled.finally(() => replaying.delete(handled));
        done();
        return;
      }
      handling[lane] = handled.then((acknowledge) => {
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
      laneConnected(lane, false);
      if (connectedAt === undefined || started.disconnecting || takenOver) return;
      shortInARow = Date.now() - connectedAt < shortConnectionMs ? shortInARow + 1 : 0;
      connectedAt = undefined;
      if (shortInARow === shortConnectionsInARow) {
        logger.error(
          'mqtt: the broker keeps closing the bridge connection soon after it connects: another client probably uses its client id. ' +
            'Two replicas with the same SVC_REPLICA_ID do this: give each its own',
          { client_id: laneId, connections: shortInARow },
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
        subscribe(started, lane).then(
          () => {
            if (connection !== connections || !started.connected) return;
            laneSubscribed(lane);
            // Start-up says where the broker is; a reconnection is news for the operator, once.
            const log = up && lane === 0 ? logger.info : logger.debug;
            log.call(logger, 'mqtt: bridge connected', {
              session_present: sessionPresent,
              subscribed: true,
              ...(laneCount > 1 ? { lane } : {}),
            });
            // The first lane speaks for the bridge: the outbox sends again what may have been lost.
            if (lane === 0) events.brokerConnected();
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
        laneConnected(lane, true);
        subscribeOn(connections, connack.sessionPresent);
      });
      reportTrouble(started, 'bridge', () => up, reject, lane);
    });
  }

  async function stopLanes(force: boolean): Promise<void> {
    await Promise.all(lanes.map((lane) => lane?.endAsync(force)));
    lanes.length = 0;
  }

  /** Every lane connected and subscribed; when one cannot, none is left running. */
  async function startBridge(): Promise<void> {
    const starting = Array.from({ length: laneCount }, (_, lane) => startLane(lane));
    const results = await Promise.allSettled(starting);
    const failed = results.find((result) => result.status === 'rejected');
    if (failed) {
      await stopLanes(true);
      throw failed.reason;
    }
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
        await stopLanes(true);
        throw error;
      }
    },

    /** Disconnects every connection, then waits for the messages in hand. */
    async stop(): Promise<void> {
      await publishing?.endAsync();
      publishing = undefined;
      await stopLanes(false);
      await Promise.all([...handling, ...replaying]);
    },
  };
}

export type BridgeConnection = ReturnType<typeof createBridgeConnection>;
