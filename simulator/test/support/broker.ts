/**
 * A plain in-process aedes on port 0 for the simulator's tests: it signs clients in from the
 * accounts it is given and records every connection and every message, wills included.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import { Aedes, type Client } from 'aedes';

export interface Connection {
  clientId: string;
  username: string | undefined;
  password: string | undefined;
  clean: boolean;
  will: { topic: string; payload: string; qos: number; retain: boolean } | undefined;
}

export interface Published {
  topic: string;
  payload: string;
  qos: number;
  retain: boolean;
  /** The client it came from (for a last will, the client that left it); undefined when the test sent it. */
  clientId: string | undefined;
}

export interface TestBroker {
  url: string;
  connections: Connection[];
  published: Published[];
  /** Resolves with the first recorded message, from now or earlier, that `match` accepts. */
  waitFor(match: (message: Published) => boolean, timeoutMs?: number): Promise<Published>;
  /** Sends a message as the service would (for a car's `cmd`). */
  publish(topic: string, payload: unknown, qos?: 0 | 1): Promise<void>;
  /** Cuts a client's socket from the broker side, as a dropped network would. */
  dropClient(clientId: string): void;
  isConnected(clientId: string): boolean;
  close(): Promise<void>;
}

/** `check(username, password)` says whether a client may sign in. */
export async function startTestBroker(
  check: (username: string | undefined, password: string | undefined) => boolean | Promise<boolean>,
): Promise<TestBroker> {
  const connections: Connection[] = [];
  const published: Published[] = [];
  const waiters = new Set<{ match: (m: Published) => boolean; resolve: (m: Published) => void }>();
  const broker = await Aedes.createBroker({
    preConnect(_client, packet, done) {
      connections.push({
        clientId: packet.clientId,
        username: packet.username,
        password: packet.password?.toString('utf8'),
        clean: packet.clean ?? true,
        will: packet.will
          ? {
              topic: packet.will.topic,
              payload: Buffer.from(packet.will.payload).toString('utf8'),
              qos: packet.will.qos ?? 0,
              retain: packet.will.retain ?? false,
            }
          : undefined,
      });
      done(null, true);
    },
    authenticate(_client, username, password, done) {
      Promise.resolve(check(username, password?.toString('utf8'))).then(
        (ok) => done(null, ok),
        // A failing lookup is the broker's trouble, not a refused password: 3, server unavailable.
        (error: Error) => done(Object.assign(error, { returnCode: 3 as const }), false),
      );
    },
  });
  const clients = new Map<string, Client>();
  broker.on('client', (client) => clients.set(client.id, client));
  broker.on('clientDisconnect', (client) => {
    if (clients.get(client.id) === client) clients.delete(client.id);
  });
  broker.on('publish', (packet, client: Client | null) => {
    if (packet.topic.startsWith('$SYS')) return;
    const message: Published = {
      topic: packet.topic,
      payload: Buffer.from(packet.payload).toString('utf8'),
      qos: packet.qos,
      retain: packet.retain,
      clientId: client?.id,
    };
    published.push(message);
    for (const waiter of waiters) {
      if (waiter.match(message)) {
        waiters.delete(waiter);
        waiter.resolve(message);
      }
    }
  });
  const server: Server = createServer(broker.handle);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };

  return {
    url: `mqtt://127.0.0.1:${port}`,
    connections,
    published,
    waitFor(match, timeoutMs = 10_000) {
      const earlier = published.find(match);
      if (earlier) return Promise.resolve(earlier);
      return new Promise((resolve, reject) => {
        const waiter = { match, resolve };
        waiters.add(waiter);
        setTimeout(() => {
          if (waiters.delete(waiter)) reject(new Error(`no such message within ${timeoutMs} ms`));
        }, timeoutMs).unref();
      });
    },
    publish(topic, payload, qos = 1) {
      return new Promise((resolve, reject) =>
        broker.publish(
          {
            cmd: 'publish',
            topic,
            payload: Buffer.from(JSON.stringify(payload)),
            qos,
            retain: false,
            dup: false,
          },
          (error) => (error ? reject(error) : resolve()),
        ),
      );
    },
    dropClient(clientId) {
      const client = clients.get(clientId);
      if (!client) throw new Error(`${clientId} is not connected`);
      client.conn.destroy();
    },
    isConnected(clientId) {
      return clients.has(clientId);
    },
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await new Promise<void>((resolve) => broker.close(() => resolve()));
    },
  };
}
