/**
 * The embedded broker (aedes 1.x) on MQTT_PORT: it signs clients in against the credential store
 * and asks the ACL table (acl.ts) on every publish and subscribe. Credentials are cached for a few
 * seconds; provisioning clears a user name's entry at once and disconnects its clients.
 *
 * Before anyone signs in, the broker is open to the internet: a packet larger than
 * `maxPacketBytes` ends its connection before aedes buffers it (packet-size-guard.ts), a user name
 * that can be no one is refused without reading the store, and a miss is cached like a hit, so
 * that a flood of wrong passwords costs a store read per user name, not per attempt.
 *
 * A client that keeps its session (`clean: false`) gets, while away, only what its row of the
 * table lets it receive, and no more than its queue bound (broker-sessions.ts); every message the
 * broker forwards, queued, retained or live, is checked against the table again (`mayReceive`).
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { redactDeviceId, validateDeviceId } from '@svc/sdk';
import { Aedes, type AuthenticateError, type Client } from 'aedes';
import type { Logger } from '../logger.ts';
import { type BrokerPrincipal, mayPublish, mayReceive, maySubscribe } from './acl.ts';
import { redactTopic, type ServiceBroker } from './broker.ts';
import type { BrokerAccounts } from './broker-accounts.ts';
import type { BrokerMetrics } from './broker-metrics.ts';
import { BrokerSessions, type QueueBound } from './broker-sessions.ts';
import { type BrokerCredential, type CredentialStore, secretMatches } from './credentials.ts';
import { guardPacketSize, maxPacketBytes } from './packet-size-guard.ts';

/** The service's own user name on the embedded broker; never in the credential store. */
export const serviceUsername = 'svc:service';

/** How long a credential read from the store is trusted without reading it again. */
const cacheMs = 5000;
/** Enough user names for a large fleet reconnecting at once; beyond it the oldest go. */
const cacheLimit = 50_000;

/** MQTT 3.1.1 CONNACK return codes (aedes passes them through). */
const serverUnavailable = 3;
const badUserNameOrPassword = 4;
const notAuthorized = 5;

interface SignedIn {
  username: string;
  principal: BrokerPrincipal;
}

function refusal(returnCode: number, message: string): AuthenticateError {
  return Object.assign(new Error(message), { returnCode }) as AuthenticateError;
}

/**
 * Whether `clientId` may be used by `username`: a car's is its device id (a car must not take
 * another's client id, which would disconnect it); a connector or the service may open several
 * connections, as `<username>` or `<username>/<anything>`.
 */
function clientIdAllowed(principal: BrokerPrincipal, username: string, clientId: string): boolean {
  if (principal.role === 'car') return clientId === username;
  return clientId === username || clientId.startsWith(`${username}/`);
}

/** Who a stored credential makes the user `username`, or undefined if it makes no one. */
function principalOf(username: string, credential: BrokerCredential): BrokerPrincipal | undefined {
  if (credential.role === 'connector') return { role: 'connector', brand: credential.brand };
  try {
    const { brand, nativeId } = validateDeviceId(username);
    return brand === credential.brand ? { role: 'car', brand, nativeId } : undefined;
  } catch {
    return undefined;
  }
}

/** Whether `username` could be a car's or a connector's, so that the store may know it. */
function mayBeSomeone(username: string): boolean {
  if (username.startsWith('connector:')) return true;
  try {
    validateDeviceId(username);
    return true;
  } catch {
    return false;
  }
}

/** User names as they may be logged: a car's redacted, a connector's or the service's as they are. */
function loggedUsername(username: string): string {
  return username.startsWith('connector:') || username === serviceUsername
    ? username
    : redactDeviceId(username);
}

/** Whether `clientId` is one of the service's own connections (the bridge's, a replica's). */
function isServiceClient(clientId: string): boolean {
  return clientId === serviceUsername || clientId.startsWith(`${serviceUsername}/`);
}

/**
 * What the broker queues for the service's own sessions: the bound docs/operating.md, "The broker", asks of
 * Mosquitto, room for the bridge to fall behind in a burst without losing what cars delivered.
 */
const serviceQueueBound: QueueBound = { messages: 100_000, bytes: 256 * 1024 * 1024 };

/** Listens on `port` of `host`; the URL clients reach it at (its real port when `port` is 0). */
async function listen(server: Server, port: number, host: string, scheme: 'mqtt' | 'mqtts'): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject).listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const real = typeof address === 'object' && address ? address.port : port;
  return `${scheme}://${host.includes(':') ? `[${host}]` : host}:${real}`;
}

export function createEmbeddedBroker(deps: {
  credentials: CredentialStore;
  host: string;
  port: number;
  logger: Logger;
  metrics: BrokerMetrics;
  /** What is queued for a car or a connector that keeps its session (MQTT_MAX_QUEUED_*). */
  queueBound: QueueBound;
  /** A second listener, with TLS (MQTT_TLS_*), on the same host; the same sign-in and table. */
  tls?: { port: number; cert: Buffer; key: Buffer };
}): ServiceBroker {
  const { credentials, logger, metrics } = deps;
  const serviceCredential = { username: serviceUsername, password: randomBytes(24).toString('base64url') };
  const cache = new Map<string, { credential: BrokerCredential | undefined; until: number }>();
  /** Store reads under way, so that many sign-ins as one user name at once read it once. */
  const reading = new Map<string, Promise<BrokerCredential | undefined>>();
  /** Counts changes to credentials, so that a sign-in that read the store before one reads again. */
  let changes = 0;
  const signedIn = new WeakMap<Client, SignedIn>();
  /** The clients signed in as each user name, to disconnect on rotation or decommission. */
  const sessions = new Map<string, Set<Client>>();
  let aedes: Aedes | undefined;
  let server: Server | undefined;
  let tlsServer: Server | undefined;
  let tlsUrl: string | undefined;
  /** The raw connections, so that stopping never waits on a client that does not leave. */
  const connections = new Set<Socket>();

  async function credentialOf(username: string): Promise<BrokerCredential | undefined> {
    const cached = cache.get(username);
    if (cached && cached.until > Date.now()) return cached.credential;
    const underWay = reading.get(username);
    if (underWay) return underWay;
    const changesBefore = changes;
    const read = credentials.get(username).then((credential) => {
      // A credential changed during the read may be stale: it is not kept for others.
      if (changes === changesBefore) {
        if (cache.size >= cacheLimit) cache.delete(cache.keys().next().value as string);
        cache.set(username, { credential, until: Date.now() + cacheMs });
      }
      return credential;
    });
    reading.set(username, read);
    try {
      return await read;
    } finally {
      if (reading.get(username) === read) reading.delete(username);
    }
  }

  /** Who signs in with these, or undefined; a credential changed meanwhile means reading again. */
  async function signIn(username: string, password: string): Promise<BrokerPrincipal | undefined> {
    if (username === serviceUsername) {
      const expected = Buffer.from(serviceCredential.password);
      const given = Buffer.from(password);
      return given.length === expected.length && timingSafeEqual(given, expected)
        ? { role: 'service' }
        : undefined;
    }
    if (!mayBeSomeone(username)) return undefined;
    for (;;) {
      const before = changes;
      const credential = await credentialOf(username);
      if (changes !== before) continue;
      return credential && secretMatches(password, credential)
        ? principalOf(username, credential)
        : undefined;
    }
  }

  function remember(client: Client, session: SignedIn): void {
    signedIn.set(client, session);
    const clients = sessions.get(session.username) ?? new Set<Client>();
    sessions.set(session.username, clients);
    clients.add(client);
    client.conn.once('close', () => {
      clients.delete(client);
      if (clients.size === 0 && sessions.get(session.username) === clients) sessions.delete(session.username);
    });
  }

  function forget(username: string): void {
    cache.delete(username);
    reading.delete(username);
    changes += 1;
    for (const client of sessions.get(username) ?? []) client.close();
    sessions.delete(username);
  }

  const accounts: BrokerAccounts = {
    async put(account) {
      forget(account.username);
    },
    async remove(username) {
      forget(username);
    },
    // It keeps no accounts: every sign-in reads the key-value store.
    async list() {
      return undefined;
    },
  };

  function authenticate(
    client: Client,
    username: string | undefined,
    password: Buffer | undefined,
    done: (error: AuthenticateError | null, success: boolean | null) => void,
  ): void {
    if (!username || !password) {
      done(refusal(notAuthorized, 'a user name and password are required'), null);
      return;
    }
    signIn(username, password.toString('utf8')).then(
      (principal) => {
        if (!principal) {
          metrics.refused('credential');
          logger.info('broker sign-in refused', { username: loggedUsername(username), reason: 'credential' });
          done(refusal(badUserNameOrPassword, 'bad user name or password'), null);
        } else if (!clientIdAllowed(principal, username, client.id)) {
          metrics.refused('client_id');
          logger.info('broker sign-in refused', { username: loggedUsername(username), reason: 'client_id' });
          done(refusal(notAuthorized, 'this client id belongs to another user'), null);
        } else {
          remember(client, { username, principal });
          done(null, true);
        }
      },
      (error: unknown) => {
        metrics.refused('store_unavailable');
        logger.warn('broker sign-in failed: the credential store does not answer', { error });
        done(refusal(serverUnavailable, 'server unavailable'), null);
      },
    );
  }

  return {
    accounts,
    serviceCredential,
    async start() {
      aedes = await Aedes.createBroker({
        persistence: new BrokerSessions({
          mayKeep(client, filter) {
            const session = signedIn.get(client);
            return session !== undefined && maySubscribe(session.principal, filter);
          },
          boundOf: (clientId) => (isServiceClient(clientId) ? serviceQueueBound : deps.queueBound),
          dropped(clientId, limit, first) {
            metrics.queueDropped(limit);
            if (first) {
              const bound = isServiceClient(clientId) ? serviceQueueBound : deps.queueBound;
              logger.warn('broker queue full: messages for this client are dropped until it takes some', {
                client_id: isServiceClient(clientId) ? clientId : loggedUsername(clientId),
                limit,
                bound: bound[limit],
              });
            }
          },
        }),
        authenticate,
        // A refused publish (a topic outside the publisher's row, or its last will there) is
        // dropped; aedes then disconnects the client, as MQTT 3.1.1 offers no negative PUBACK.
        authorizePublish(client, packet, callback) {
          const session = client ? signedIn.get(client) : undefined;
          if (session && mayPublish(session.principal, packet.topic)) return callback(null);
          logger.info('broker publish refused', {
            username: session ? loggedUsername(session.username) : undefined,
            topic: redactTopic(packet.topic),
          });
          callback(new Error('publish not authorized'));
        },
        // A refused subscription is answered with the failure code 128 in the SUBACK.
        authorizeSubscribe(client, subscription, callback) {
          const session = signedIn.get(client);
          if (session && maySubscribe(session.principal, subscription.topic)) {
            return callback(null, subscription);
          }
          logger.info('broker subscription refused', {
            username: session ? loggedUsername(session.username) : undefined,
            filter: redactTopic(subscription.topic),
          });
          callback(null, null);
        },
        // Whatever brought a message here (a subscription, a session's queue, a retained message),
        // it reaches a client only on a topic its row of the table lets it receive.
        authorizeForward(client, packet) {
          const session = signedIn.get(client);
          return session && mayReceive(session.principal, packet.topic) ? packet : null;
        },
      });
      const handle = aedes.handle;
      /** One connection, plain or TLS: bounded in packet size before aedes reads it. */
      const take = (socket: Socket) => {
        connections.add(socket);
        socket.once('close', () => connections.delete(socket));
        const guarded = guardPacketSize(socket, maxPacketBytes, (refusal) => {
          metrics.refused(refusal.reason);
          logger.warn('broker connection closed: a packet too large to take, or a malformed one', {
            reason: refusal.reason,
            remote: socket.remoteAddress,
            announced_bytes: refusal.announcedBytes,
            limit_bytes: maxPacketBytes,
          });
        });
        handle(guarded);
      };
      const listening = createServer(take);
      server = listening;
      const url = await listen(listening, deps.port, deps.host, 'mqtt');
      if (deps.tls) {
        const secure = createTlsServer({ cert: deps.tls.cert, key: deps.tls.key }, take);
        // A handshake refused (a client that does not trust the certificate, or speaks plain MQTT
        // here) is the client's affair: counted, never an error of the broker's.
        secure.on('tlsClientError', () => metrics.refused('tls_handshake'));
        tlsServer = secure;
        try {
          tlsUrl = await listen(secure, deps.tls.port, deps.host, 'mqtts');
        } catch (error) {
          throw Object.assign(error as Error, { listener: 'MQTT_TLS' });
        }
      }
      return url;
    },
    get tlsUrl() {
      return tlsUrl;
    },
    signedInCars() {
      let cars = 0;
      for (const clients of sessions.values()) {
        const client = clients.values().next().value;
        if (client && signedIn.get(client)?.principal.role === 'car') cars += 1;
      }
      return cars;
    },
    async stop() {
      const listeners = [server, tlsServer];
      server = undefined;
      tlsServer = undefined;
      tlsUrl = undefined;
      const closed = Promise.all(
        listeners.map((listening) =>
          listening?.listening ? new Promise<void>((resolve) => listening.close(() => resolve())) : undefined,
        ),
      );
      const broker = aedes;
      aedes = undefined;
      if (broker) await new Promise<void>((resolve) => broker.close(() => resolve()));
      // aedes ends its clients; a connection that has not gone by then (a client that never
      // answers the close, one still before its CONNECT) must not hold the server's close.
      for (const socket of connections) socket.destroy();
      await closed;
      sessions.clear();
      cache.clear();
    },
  };
}
