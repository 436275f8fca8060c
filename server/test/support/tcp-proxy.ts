/**
 * A TCP proxy for outages, between the service and Postgres or between a car and its broker: it
 * can refuse new connections (the server down), reset the open ones (the network cut), swallow what
 * clients send on the open ones (a car whose messages never arrive), hold back what the server
 * sends on them until the client speaks again, and take connections again.
 */
import { connect, createServer, type Socket } from 'node:net';

export interface TcpProxy {
  port: number;
  /** Resets every open connection and stops listening: new connections are refused. */
  refuse(): Promise<void>;
  /** Resets every open connection and keeps listening. */
  cut(): void;
  /**
   * From now on drops what the clients of the open connections send, while the server's answers
   * still reach them. Connections made afterwards pass everything.
   */
  swallow(): void;
  /** How many bytes `swallow` dropped. */
  readonly swallowedBytes: number;
  /**
   * From now on what the server sends on the open connections, and its closing of one, reaches
   * that connection's client only when the client next sends something. So a server that ends an
   * idle connection is noticed as a process that is busy elsewhere notices it: only when it sends
   * its next statement there. Connections made afterwards pass everything at once.
   */
  holdUntilClientSpeaks(): void;
  /** Listens again, on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  /** How to stop passing on what each open connection's client sends. */
  const swallowers = new Set<() => void>();
  /** How to start holding back what each open connection's server sends. */
  const holders = new Set<() => void>();
  let swallowedBytes = 0;
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
  };
  const server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    track(client);
    track(upstream);
    client.pipe(upstream).pipe(client);
    const swallowOne = () => {
      client.unpipe(upstream);
      client.on('data', (chunk: Buffer) => {
        swallowedBytes += chunk.length;
      });
      // Unpiped, the client stream stands paused: it must flow to be drained.
      client.resume();
    };
    let holding = false;
    const holdOne = () => {
      holding = true;
      // Both ways by hand from here: an unpiped stream stands paused.
      upstream.unpipe(client);
      client.unpipe(upstream);
      const held: Buffer[] = [];
      let serverClosed = false;
      let clientSpoke = false;
      upstream.on('data', (chunk: Buffer) => {
        if (clientSpoke) client.write(chunk);
        else held.push(chunk);
      });
      upstream.on('close', () => {
        serverClosed = true;
        if (clientSpoke) client.end();
      });
      client.on('data', (chunk: Buffer) => {
        if (!serverClosed) upstream.write(chunk);
        if (clientSpoke) return;
        clientSpoke = true;
        for (const piece of held) client.write(piece);
        if (serverClosed) client.end();
      });
      upstream.resume();
      client.resume();
    };
    swallowers.add(swallowOne);
    holders.add(holdOne);
    client.on('close', () => {
      swallowers.delete(swallowOne);
      holders.delete(holdOne);
      upstream.destroy();
    });
    upstream.on('close', () => {
      if (!holding) client.destroy();
    });
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject).listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
  const cut = () => {
    for (const socket of sockets) socket.resetAndDestroy();
  };
  const stop = () =>
    new Promise<void>((resolve) => {
      if (!server.listening) return resolve();
      server.close(() => resolve());
      cut();
    });

  await listen(0);
  const { port } = server.address() as { port: number };
  return {
    port,
    refuse: stop,
    cut,
    swallow() {
      for (const swallowOne of swallowers) swallowOne();
      swallowers.clear();
    },
    get swallowedBytes() {
      return swallowedBytes;
    },
    holdUntilClientSpeaks() {
      for (const holdOne of holders) holdOne();
      holders.clear();
    },
    restore: () => listen(port),
    close: stop,
  };
}
