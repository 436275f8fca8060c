/**
 * A web origin of a test's own: a local HTTP server on a free port that answers fixed pages and
 * scripts. Two of them are two origins, as a host page and the app it embeds are in a car.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname } from 'node:path';

export interface Origin {
  /** `http://127.0.0.1:<port>`, as browsers write the origin. */
  origin: string;
  close(): Promise<void>;
}

const types: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'application/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
};

/** A page's body, or a file read at each request (a bundle a build may replace). */
export type Content = string | { file: string };

export async function serveOrigin(paths: Record<string, Content>): Promise<Origin> {
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://origin').pathname;
    const content = paths[path];
    if (content === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end(`no ${path} here`);
      return;
    }
    const body = typeof content === 'string' ? content : readFileSync(content.file);
    const type =
      types[extname(typeof content === 'string' ? path : content.file)] ?? 'text/html; charset=utf-8';
    res.writeHead(200, { 'content-type': type, 'cache-control': 'no-store' }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A port nothing listens on just now, for a process that must be told its port. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
