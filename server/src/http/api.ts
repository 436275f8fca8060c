/**
 * The HTTP API as an express app. Middleware in a fixed order: requests in flight and their
 * pacing → OPTIONS and CORS → old-CLI check → the presigned upload URL's form → per operation:
 * express.json (where it takes JSON), contract validator, handler → docs and the contracts, the
 * runtime script, the console → problems.
 */
import { readFileSync } from 'node:fs';
import express from 'express';
import { routes } from '../../../generated/routes.ts';
import { asyncContractFiles, contractFile } from '../built-files.ts';
import type { Config } from '../config.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import type { Services } from '../services.ts';
import { bearerAuthenticator } from './authenticate.ts';
import { bindHandlers } from './bind-handlers.ts';
import { requireCurrentCli } from './cli-version.ts';
import { consoleRouter } from './console.ts';
import { crossOrigin } from './cors.ts';
import { docsPaths, docsRouter } from './docs.ts';
import { notFound, problemMiddleware } from './errors.ts';
import { createHandlers } from './handlers/index.ts';
import { inFlightRequests } from './in-flight.ts';
import { requireIssuedUploadUrl } from './presigned-upload.ts';
import { requestLog } from './request-log.ts';
import { requestPacing } from './request-pacing.ts';
import { sdkScriptPaths, sdkScriptRouter } from './sdk-script.ts';
import { originFormTarget } from './transport.ts';
import { contractValidators } from './validation.ts';

export interface HttpApiDependencies {
  config: Config;
  services: Services;
  logger: Logger;
  metrics: Metrics;
  /** The service's base URL, as the request's Host names it when that is one of its own names. */
  audience: (requestHost?: string) => string;
  /** Folder with the built reference page (`npm run build`); /docs says how to build it when absent. */
  docsDir?: string;
  /** The browser build of the runtime served at /_svc/sdk.js; by default client/dist/runtime.browser.js. */
  sdkScript?: string;
  /** The built web console served at /console; by default console/dist (`npm run build`). */
  consoleDir?: string;
}

export function createHttpApi({
  config,
  services,
  logger,
  metrics,
  audience,
  ...built
}: HttpApiDependencies) {
  const contract = JSON.parse(readFileSync(contractFile, 'utf8'));
  const asyncContract = {
    yaml: readFileSync(asyncContractFiles.yaml, 'utf8'),
    json: readFileSync(asyncContractFiles.json, 'utf8'),
  };
  const app = express();
  app.disable('x-powered-by');
  // No answer is to be taken for another type than it says (a package or a problem as a page).
  app.use((_req, res, next) => {
    res.setHeader('X-Content-Type-Options', 'nosniff');
    next();
  });
  app.set('query parser', 'simple');
  // Behind a load balancer the client address (sign-in limits) comes from X-Forwarded-For.
  if (config.trustProxy) app.set('trust proxy', config.trustProxy);
  // API answers are per caller and rarely repeated; hashing each body for an ETag buys nothing.
  app.set('etag', false);
  // API answers carry no validators (no ETag, no Last-Modified), so no conditional request is
  // ever fresh: without this, `If-None-Match: *` turned a 200 into an empty 304.
  Object.defineProperty(app.request, 'fresh', { configurable: true, get: () => false });
  const inFlight = inFlightRequests();
  const pacing = requestPacing({
    timeoutMs: config.requestTimeoutSeconds * 1000,
    minBytesPerSecond: config.minBodyBytesPerSecond,
  });
  app.use(requestLog(logger), metrics.observeRequests, inFlight.track, pacing.middleware);
  app.use(originFormTarget);
  // Before anything can answer: every answer to a listed origin, a refusal too, must be readable.
  app.use(
    crossOrigin({
      origins: config.corsOrigins,
      contract,
      getPaths: [...docsPaths, ...sdkScriptPaths],
      // The key set is public, and the SDK verifies tokens in browsers too.
      publicPaths: [routes.getJwks.expressPath],
    }),
  );
  app.use(requireCurrentCli);
  // The presigned upload PUT may take as long as its URL lives, and its URL is its credential.
  app.put(
    routes.uploadPackage.expressPath,
    pacing.allowing(config.uploadUrlTtlSeconds * 1000),
    requireIssuedUploadUrl,
  );
  const validators = contractValidators(contract, {
    validateResponses: config.validateResponses,
    jsonLimitBytes: config.jsonLimitBytes,
  });
  app.use(
    bindHandlers(express.Router(), createHandlers(services), {
      authenticate: bearerAuthenticator(services.tokens),
      validate: validators.forOperation,
    }),
  );
  app.use(docsRouter(contract, asyncContract, built.docsDir, () => audience()));
  app.use(sdkScriptRouter(built.sdkScript));
  app.use(consoleRouter(built.consoleDir));
  app.use(notFound);
  app.use(problemMiddleware({ logger, jsonLimitBytes: config.jsonLimitBytes }));
  return { app, inFlight, validators };
}
