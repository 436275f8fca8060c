/**
 * The app factory: takes config and dependencies, returns `{ app, start, stop }`. Middleware in a
 * fixed order: old-CLI check → per operation: express.json (where it takes JSON), contract
 * validator, handler → docs → problems.
 */
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { type Clock, systemClock } from './clock.ts';
import type { Config } from './config.ts';
import { bearerAuthenticator } from './http/authenticate.ts';
import { bindHandlers } from './http/bind-handlers.ts';
import { requireCurrentCli } from './http/cli-version.ts';
import { docsRouter } from './http/docs.ts';
import { notFound, problemMiddleware } from './http/errors.ts';
import { createHandlers } from './http/handlers/index.ts';
import { baseUrlFor } from './http/public-url.ts';
import { answerParserErrors, originFormTarget } from './http/transport.ts';
import { contractValidators } from './http/validation.ts';
import { ensureSigningKey } from './identity/signing-keys.ts';
import { createLogger, type Logger } from './logger.ts';
import { createServices } from './services.ts';
import {
  type Db,
  embeddedDbDir,
  migrateToLatest,
  openOwnConnection,
  openStore,
  storeOpened,
} from './store/db.ts';

const contractPath = new URL('../../generated/openapi.json', import.meta.url);

export interface AppDependencies {
  /** An open store; by default one is opened from the config (and closed by `stop`). */
  db?: Db;
  clock?: Clock;
  logger?: Logger;
  /** Folder with the built reference page (`npm run build`); /docs says how to build it when absent. */
  docsDir?: string;
}

export interface RunningApp {
  url: string;
}

export function createApp(config: Config, deps: AppDependencies = {}) {
  const logger = deps.logger ?? createLogger();
  const clock = deps.clock ?? systemClock;
  const ownsDb = !deps.db;
  const db =
    deps.db ??
    openStore({
      databaseUrl: config.databaseUrl,
      pgliteDir: config.databaseUrl ? undefined : embeddedDbDir(config.dataDir),
      acquireTimeoutMs: config.databaseAcquireTimeoutMs,
      statementTimeoutMs: config.databaseStatementTimeoutMs,
      logger,
    });
  let listeningUrl: string | undefined;
  const audience = (requestHost?: string) =>
    config.publicUrl ?? baseUrlFor(listeningUrl ?? `http://${config.host}:${config.port}`, requestHost);
  const services = createServices({ db, config, clock, audience });
  const contract = JSON.parse(readFileSync(contractPath, 'utf8'));

  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  // Behind a load balancer the client address (sign-in limits) comes from X-Forwarded-For.
  if (config.trustProxy) app.set('trust proxy', config.trustProxy);
  // API answers are per caller and rarely repeated; hashing each body for an ETag buys nothing.
  app.set('etag', false);
  // API answers carry no validators (no ETag, no Last-Modified), so no conditional request is
  // ever fresh: without this, `If-None-Match: *` turned a 200 into an empty 304.
  Object.defineProperty(app.request, 'fresh', { configurable: true, get: () => false });
  app.use(originFormTarget);
  app.use(requireCurrentCli);
  app.use(
    bindHandlers(express.Router(), createHandlers(services), {
      authenticate: bearerAuthenticator(services.tokens),
      validate: contractValidators(contract, {
        validateResponses: config.validateResponses,
        jsonLimitBytes: config.jsonLimitBytes,
      }),
    }),
  );
  app.use(docsRouter(contract, deps.docsDir));
  app.use(notFound);
  app.use(problemMiddleware({ logger, jsonLimitBytes: config.jsonLimitBytes }));

  let server: Server | undefined;

  return {
    app,
    services,
    async start(): Promise<RunningApp> {
      await storeOpened(db);
      // Start-up is no request: on Postgres it runs over a connection of its own, without the
      // requests' timeouts, since a migration may rightly take long and compiling the contract's
      // validators holds the event loop for seconds just now.
      const startup = openOwnConnection(db, {});
      try {
        await migrateToLatest(startup ?? db);
        await ensureSigningKey(startup ?? db, clock);
      } finally {
        await startup?.destroy();
      }
      server = app.listen(config.port, config.host);
      answerParserErrors(server);
      // A package upload may take as long as its URL lives; Node's default cuts requests at 5 minutes.
      server.requestTimeout = config.uploadUrlTtlSeconds * 1000;
      await new Promise<void>((resolve, reject) => {
        server?.once('listening', resolve).once('error', reject);
      });
      const { port } = server.address() as AddressInfo;
      const host = config.host.includes(':') ? `[${config.host}]` : config.host;
      listeningUrl = `http://${host}:${port}`;
      return { url: listeningUrl };
    },
    /** Stops taking connections, lets in-flight requests finish, then closes the store. */
    async stop(): Promise<void> {
      if (server) {
        const closing = new Promise<void>((resolve) => server?.close(() => resolve()));
        server.closeIdleConnections();
        await closing;
        server = undefined;
      }
      await services.storeReadiness.close();
      if (ownsDb) await db.destroy();
    },
  };
}

export type App = ReturnType<typeof createApp>;
