/**
 * A TCP proxy between the service and Postgres, for outages: it can refuse new connections (the
 * database down), reset the open ones (the network cut), and take connections again.
 */
import { connect, createServer, type Socket } from 'node:net';

export interface TcpProxy {
  port: number;
  /** Resets every open connection and stops listening: new connections are refused. */
  refuse(): Promise<void>;
  /** Resets every open connection and keeps listening. */
  cut(): void;
  /** Listens again, on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
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
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
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
  return { port, refuse: stop, cut, restore: () => listen(port), close: stop };
}
