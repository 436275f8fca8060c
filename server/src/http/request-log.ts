/**
 * One log line per request: its id, method, route template, status, duration and the account when
 * signed in. Never the raw path or query (a presigned URL's signature, a device id in a path), never
 * a header or a body. Written straight to pino when the answer is over, with no logger made per
 * request: pino-http made three child loggers a request and serialized their bindings, about a
 * tenth of a vehicle read's time.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request, RequestHandler, Response } from 'express';
import type { Principal } from '../auth/principal.ts';
import type { Logger } from '../logger.ts';

/**
 * A client's own request id is kept when it is a plain token of reasonable length. No `:`, so that
 * an id is never taken for a device id (and redacted in the log while echoed whole).
 */
const acceptedRequestId = /^[A-Za-z0-9._-]{1,128}$/;

/** Liveness and readiness, asked by machines every few seconds. */
const probeRoutes: ReadonlySet<string> = new Set(['/healthz', '/readyz']);

/** The operation's path as the contract writes it (`/api/v1/cars/{device_id}/status`), set by bindHandlers. */
export function setRouteTemplate(res: Response, template: string): void {
  res.locals.route = template;
}

/** The route a request was answered by, as the contract writes it; `unmatched` when none. */
export function routeTemplate(req: IncomingMessage, res: ServerResponse): string {
  const locals = (res as Response).locals;
  if (typeof locals?.route === 'string') return locals.route;
  // Routes outside the contract (health, docs): Express's own pattern, written as the contract would.
  const path = (req as Request).route?.path;
  return typeof path === 'string' ? path.replace(/:(\w+)/g, '{$1}') : 'unmatched';
}

/** What names a request in a line logged about it: the same id, method and route as its request line. */
export function requestFields(req: Request, res: Response): Record<string, unknown> {
  return { request_id: res.locals.requestId, method: req.method, route: routeTemplate(req, res) };
}

export function requestLog(logger: Logger): RequestHandler {
  const log = logger.pino;
  return (req, res, next) => {
    const given = req.headers['x-request-id'];
    const requestId = typeof given === 'string' && acceptedRequestId.test(given) ? given : randomUUID();
    res.locals.requestId = requestId;
    res.setHeader('X-Request-Id', requestId);
    const started = Date.now();
    let logged = false;
    // On `finish` when answered; on `close` alone when the client went away first.
    const written = () => {
      if (logged) return;
      logged = true;
      const route = routeTemplate(req, res);
      // Health probes come every few seconds from each load balancer and orchestrator: at `debug`,
      // so that LOG_LEVEL=info (the default) keeps the log to what people and cars did.
      const level = probeRoutes.has(route) ? 'debug' : 'info';
      if (!log.isLevelEnabled(level)) return;
      const principal = res.locals.principal as Principal | undefined;
      log[level](
        {
          request_id: requestId,
          method: req.method,
          route,
          status: res.statusCode,
          ...(principal ? { account_id: principal.accountId } : {}),
          duration_ms: Date.now() - started,
        },
        'request',
      );
    };
    res.once('finish', written);
    res.once('close', written);
    next();
  };
}
