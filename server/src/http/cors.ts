/**
 * OPTIONS on every path the service serves, and cross-origin calls from the web origins of
 * SVC_CORS_ORIGINS. OPTIONS always answers 204 with `Allow` (the path's methods, from
 * generated/routes.ts); a preflight from a listed origin also gets the CORS grant for that path.
 * Answers to a listed origin carry `Access-Control-Allow-Origin`, and the response headers a
 * script may read. Nothing is granted to any other origin: the browser keeps its answers from
 * the page. Bearer tokens travel in `Authorization`, never in cookies, so no credentials mode.
 * The public paths (the JWKS) are the exception: every origin may read them.
 */
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { allowHeader, methodsByPath } from './allowed-methods.ts';
import { setRouteTemplate } from './request-log.ts';

/** How long a browser may keep a preflight's answer: a removed origin is refused within 10 minutes. */
export const preflightMaxAgeSeconds = 600;

type Node = Record<string, unknown>;

export interface Contract {
  paths?: Record<string, Node>;
  components?: Node;
}

const isNode = (value: unknown): value is Node =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** `node`, or what its `$ref` (`#/components/...`) names. */
function resolved(contract: Contract, node: unknown): Node | undefined {
  if (!isNode(node) || typeof node.$ref !== 'string') return isNode(node) ? node : undefined;
  const target = node.$ref
    .replace(/^#\//, '')
    .split('/')
    .reduce<unknown>((at, key) => (isNode(at) ? at[key] : undefined), contract);
  return isNode(target) ? target : undefined;
}

const methods = ['get', 'put', 'post', 'delete', 'patch'];

/**
 * What the contract lets a caller send and read in headers beyond the CORS-safelisted ones:
 * `Authorization` and `Content-Type` (JSON bodies, the package's gzip), every header parameter
 * (`Idempotency-Key`); and every response header it documents (`Retry-After`,
 * `WWW-Authenticate`, `Idempotent-Replayed`), with the `X-Request-Id` of every answer.
 */
export function contractHeaders(contract: Contract): { request: string[]; response: string[] } {
  const request = new Set(['Authorization', 'Content-Type']);
  const response = new Set(['X-Request-Id']);
  for (const item of Object.values(contract.paths ?? {})) {
    const operations = methods.map((method) => item[method]).filter(isNode);
    const parameters = [item, ...operations].flatMap((node) =>
      Array.isArray(node.parameters) ? node.parameters : [],
    );
    for (const parameter of parameters.map((node) => resolved(contract, node))) {
      if (parameter?.in === 'header' && typeof parameter.name === 'string') request.add(parameter.name);
    }
    for (const operation of operations) {
      for (const entry of Object.values(isNode(operation.responses) ? operation.responses : {})) {
        const headers = resolved(contract, entry)?.headers;
        for (const name of Object.keys(isNode(headers) ? headers : {})) {
          // The contract documents a public path's own grant; it is no header a script reads.
          if (!/^access-control-/i.test(name)) response.add(name);
        }
      }
    }
  }
  return { request: [...request], response: [...response] };
}

export interface CrossOriginOptions {
  /** Origins as browsers send them (`https://app.example.com`); empty: none is granted. */
  origins: ReadonlySet<string>;
  /** The bundled contract: which request and response headers to grant. */
  contract: Contract;
  /** Paths outside the contract that the service answers with GET (the docs, /openapi.json). */
  getPaths?: readonly string[];
  /**
   * Express paths whose answers hold nothing secret and take no credential (the JWKS): every
   * origin may read them (`*`), and every origin's preflight for them is granted, so that a page
   * of any origin can verify identity tokens with `verifyIdentityToken({ jwksUrl })`.
   */
  publicPaths?: readonly string[];
}

export function crossOrigin(options: CrossOriginOptions): Router {
  const router = express.Router();
  const headers = contractHeaders(options.contract);
  const allowHeaders = headers.request.join(', ');
  const exposeHeaders = headers.response.join(', ');
  const listed = (req: Request): string | undefined => {
    const origin = req.get('origin');
    return origin !== undefined && options.origins.has(origin) ? origin : undefined;
  };
  const publicPaths = new Set(options.publicPaths ?? []);

  router.use((req: Request, res: Response, next: NextFunction) => {
    // Answers differ by Origin once any origin is listed: caches must keep them apart.
    if (options.origins.size > 0) res.vary('Origin');
    if (publicPaths.has(req.path) && req.method !== 'OPTIONS') {
      // The same for every origin, a refusal too; no credentials, so `*` is the whole grant.
      res.setHeader('Access-Control-Allow-Origin', '*');
      return next();
    }
    const origin = listed(req);
    if (origin && req.method !== 'OPTIONS') {
      res.setHeader('Access-Control-Allow-Origin', origin);
      res.setHeader('Access-Control-Expose-Headers', exposeHeaders);
    }
    next();
  });

  // Only OPTIONS requests meet the routes below: any other left them only after testing its path
  // against every path of the contract (one preflight route each), on every request.
  const preflights = express.Router();
  router.use((req: Request, res: Response, next: NextFunction) =>
    req.method === 'OPTIONS' ? preflights(req, res, next) : next(),
  );
  const paths = methodsByPath();
  for (const path of options.getPaths ?? []) paths.set(path, { openapiPath: path, methods: ['GET', 'HEAD'] });
  const every = new Set<string>();
  for (const [expressPath, { openapiPath, methods }] of paths) {
    for (const method of methods) every.add(method);
    const allow = allowHeader(methods);
    const open = publicPaths.has(expressPath);
    preflights.options(expressPath, (req: Request, res: Response) => {
      setRouteTemplate(res, openapiPath);
      res.setHeader('Allow', allow);
      const preflight = req.get('access-control-request-method') !== undefined;
      if (open && preflight) {
        // A page that adds a header of its own (`Cache-Control`, `If-None-Match`) still may GET it.
        res.setHeader('Access-Control-Allow-Origin', '*');
        res.setHeader('Access-Control-Allow-Methods', methods.join(', '));
        res.setHeader('Access-Control-Allow-Headers', '*');
        res.setHeader('Access-Control-Max-Age', String(preflightMaxAgeSeconds));
        res.status(204).end();
        return;
      }
      const origin = listed(req);
      if (origin && preflight) {
        res.setHeader('Access-Control-Allow-Origin', origin);
        res.setHeader('Access-Control-Allow-Methods', methods.join(', '));
        res.setHeader('Access-Control-Allow-Headers', allowHeaders);
        res.setHeader('Access-Control-Max-Age', String(preflightMaxAgeSeconds));
      }
      res.status(204).end();
    });
  }
  // `OPTIONS *`: what the server as a whole takes (RFC 9110 §9.3.7).
  const allowAny = allowHeader([...every]);
  preflights.use((req: Request, res: Response, next: NextFunction) => {
    if (req.url !== '*') return next();
    setRouteTemplate(res, '*');
    res.setHeader('Allow', allowAny);
    res.status(204).end();
  });
  return router;
}
