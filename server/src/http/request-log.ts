/**
 * One log line per request (pino-http): its id, method, route template, status, duration and the
 * account when signed in. Never the raw path or query (a presigned URL's signature, a device id
 * in a path), never a header or a body.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request, Response } from 'express';
import { pinoHttp } from 'pino-http';
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
  return { request_id: req.id, method: req.method, route: routeTemplate(req, res) };
}

export function requestLog(logger: Logger) {
  return pinoHttp({
    logger: logger.pino,
    genReqId(req, res) {
      const given = req.headers['x-request-id'];
      const id = typeof given === 'string' && acceptedRequestId.test(given) ? given : randomUUID();
      res.setHeader('X-Request-Id', id);
      return id;
    },
    quietReqLogger: true,
    quietResLogger: true,
    customAttributeKeys: { reqId: 'request_id', responseTime: 'duration_ms' },
    // The line says what happened; errors are logged where they are understood (problemMiddleware).
    // Health probes come every few seconds from each load balancer and orchestrator: at `debug`,
    // so that LOG_LEVEL=info (the default) keeps the log to what people and cars did.
    customLogLevel: (req, res) => (probeRoutes.has(routeTemplate(req, res)) ? 'debug' : 'info'),
    customSuccessMessage: () => 'request',
    customErrorMessage: () => 'request',
    wrapSerializers: false,
    serializers: { req: () => undefined, res: () => undefined, err: () => undefined },
    customProps(req, res) {
      const principal = (res as Response).locals?.principal as Principal | undefined;
      return {
        method: req.method,
        route: routeTemplate(req, res),
        status: res.statusCode,
        ...(principal ? { account_id: principal.accountId } : {}),
      };
    },
  });
}
