/**
 * Prometheus metrics (DESIGN.md §13), on a listener of their own (METRICS_HOST:METRICS_PORT),
 * never on the public port. One registry per service instance, so that several in one process
 * (tests, replicas) count apart. The MQTT and command metrics join this registry later.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { NextFunction, Request, Response } from 'express';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { routes } from '../../generated/routes.ts';
import { routeTemplate } from './http/request-log.ts';
import { ListenError } from './listen-error.ts';
import { release } from './release.ts';

export interface Metrics {
  readonly registry: Registry;
  /** Express middleware: counts and times every request by route template, method and status. */
  observeRequests(req: Request, res: Response, next: NextFunction): void;
}

/** Sign-ins by how they were made and how they ended, read off the two operations that make tokens. */
const signInRoutes: ReadonlyMap<string, string> = new Map([
  [routes.createAccessToken.openapiPath, 'ssh_key'],
  [routes.createSession.openapiPath, 'password'],
]);
const uploadRoute = routes.uploadPackage.openapiPath;

function signInOutcome(status: number): string {
  if (status === 201) return 'signed_in';
  if (status === 401 || status === 403) return 'refused';
  if (status === 429) return 'limited';
  if (status >= 500) return 'failed';
  return 'invalid_request';
}

function uploadOutcome(status: number): string {
  if (status === 201) return 'stored';
  if (status === 413) return 'too_large';
  if (status === 408) return 'too_slow';
  if (status === 409) return 'in_progress';
  if (status >= 500) return 'failed';
  return 'refused';
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // Always 1: the label says which release each replica runs, as a rolling upgrade goes on.
  new Gauge({
    name: 'svc_build_info',
    help: 'The release this process runs (server/package.json), in the version label; always 1.',
    labelNames: ['version'] as const,
    registers: [registry],
  }).set({ version: release }, 1);
  const requests = new Counter({
    name: 'svc_http_requests_total',
    help: 'HTTP requests answered, by route template, method and status.',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'svc_http_request_duration_seconds',
    help: 'Time from a request arriving to its answer being sent, by route template and method.',
    labelNames: ['route', 'method'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const signIns = new Counter({
    name: 'svc_sign_ins_total',
    help: 'Sign-ins, by method (ssh_key, password) and outcome (signed_in; refused: a wrong password, key or signature; limited: 429; invalid_request: a malformed request; failed: 5xx).',
    labelNames: ['method', 'outcome'] as const,
    registers: [registry],
  });
  const uploads = new Counter({
    name: 'svc_uploads_total',
    help: 'Package uploads to presigned URLs, by outcome (stored, too_large, too_slow, in_progress, refused, failed).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });

  return {
    registry,
    observeRequests(req, res, next) {
      const started = process.hrtime.bigint();
      res.once('finish', () => {
        const route = routeTemplate(req, res);
        const status = res.statusCode;
        requests.inc({ route, method: req.method, status });
        duration.observe({ route, method: req.method }, Number(process.hrtime.bigint() - started) / 1e9);
        const signIn = signInRoutes.get(route);
        if (signIn) signIns.inc({ method: signIn, outcome: signInOutcome(status) });
        else if (route === uploadRoute) uploads.inc({ outcome: uploadOutcome(status) });
      });
      next();
    },
  };
}

/**
 * The metrics listener: `GET /metrics` in Prometheus's text format, and nothing else. A place that
 * cannot be had is a `ListenError` for METRICS_HOST and METRICS_PORT.
 */
export async function listenForMetrics(
  metrics: Metrics,
  host: string,
  port: number,
): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('Only GET /metrics is served here.\n');
      return;
    }
    metrics.registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
      () => res.writeHead(500).end(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    const refused = (error: Error) => reject(new ListenError('METRICS', error));
    server.once('error', refused);
    server.listen(port, host, () => {
      server.off('error', refused);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return { url: `http://${shownHost}:${address.port}/metrics`, server };
}
