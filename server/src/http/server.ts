/** The API's listener: where it listens and its deadlines, and its graceful close. */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';
import type { Config } from '../config.ts';
import { ListenError } from '../listen-error.ts';
import type { Logger } from '../logger.ts';
import type { inFlightRequests } from './in-flight.ts';
import { shuttingDown } from './problem.ts';
import { answerParserErrors } from './transport.ts';

/** Listens on HOST and PORT; a place that cannot be had is a `ListenError` for them. */
export async function listen(
  app: Express,
  config: Pick<Config, 'host' | 'port' | 'uploadUrlTtlSeconds' | 'requestTimeoutSeconds'>,
): Promise<{ server: Server; url: string }> {
  const server = app.listen(config.port, config.host);
  answerParserErrors(server);
  // Each request's own deadline is kept by `requestPacing`; Node's, one for the whole server,
  // is only a backstop behind the longest of them (an upload's). Headers take the short one.
  server.requestTimeout = (config.uploadUrlTtlSeconds + config.requestTimeoutSeconds) * 1000;
  server.headersTimeout = Math.min(60_000, config.requestTimeoutSeconds * 1000);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve).once('error', (error) => reject(new ListenError('', error)));
  });
  const { port } = server.address() as AddressInfo;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  return { server, url: `http://${host}:${port}` };
}

/**
 * Stops taking connections and lets requests in flight finish for up to the grace; then answers
 * those still running 503 and closes their connections (a cut upload lets its URL go and deletes
 * its partial file). Resolves, once the server has closed, to the number of requests cut.
 */
export async function closeGracefully(
  server: Server,
  {
    graceMs,
    inFlight,
    logger,
  }: { graceMs: number; inFlight: ReturnType<typeof inFlightRequests>; logger: Logger },
): Promise<number> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  // A connection whose request finishes now would be kept alive for its client's next one, and
  // hold the close until the grace is over: it is closed as soon as it is idle.
  inFlight.onEachClosed(() => server.closeIdleConnections());
  let graceTimer: NodeJS.Timeout | undefined;
  const graceOver = new Promise<'grace over'>((resolve) => {
    graceTimer = setTimeout(() => resolve('grace over'), graceMs);
  });
  const outcome = await Promise.race([closed, graceOver]);
  clearTimeout(graceTimer);
  if (outcome !== 'grace over') return 0;
  const cut = inFlight.size;
  logger.info('stopping: cutting requests still in flight', { requests: cut });
  await inFlight.cutAll(shuttingDown(), 1000);
  server.closeAllConnections();
  await closed;
  return cut;
}
