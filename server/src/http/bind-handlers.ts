/**
 * Binds one handler per operationId of the contract to an Express router. The types come from
 * generated/openapi.ts and the paths from generated/routes.ts, so a new operation in the contract
 * is a compile error until it has a handler, and a handler for an operation the contract lacks,
 * or one answering with a status or body the contract does not allow, does not compile either.
 */
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import express, {
  type NextFunction,
  type Request,
  type RequestHandler,
  type Response,
  type Router,
} from 'express';
import type { operations } from '../../../generated/openapi.ts';
import { type OperationId, routes } from '../../../generated/routes.ts';
import type { Principal } from '../auth/principal.ts';
import { allowHeader, methodsByPath } from './allowed-methods.ts';
import { ProblemError } from './problem.ts';
import { setRouteTemplate } from './request-log.ts';

type Operation<K extends OperationId> = operations[K];

/** `X`, or an empty object where the contract says `never` (no such parameters). */
type OrEmpty<X> = [X] extends [never] ? Record<string, never> : X;

type RequestBodyOf<O> = O extends { requestBody?: infer B } ? B : never;
type ContentOf<B> = B extends { content: infer C } ? C[keyof C] : never;

/** What a handler receives: path, query and body as the contract types them. */
export interface OperationRequest<K extends OperationId> {
  params: OrEmpty<NonNullable<Operation<K>['parameters']['path']>>;
  query: OrEmpty<NonNullable<Operation<K>['parameters']['query']>>;
  body: [NonNullable<RequestBodyOf<Operation<K>>>] extends [never]
    ? undefined
    :
        | ContentOf<NonNullable<RequestBodyOf<Operation<K>>>>
        | (undefined extends RequestBodyOf<Operation<K>> ? undefined : never);
}

type ResponsesOf<K extends OperationId> = Operation<K>['responses'];
/** A body of bytes (a package) is a stream from its file, never held whole in memory. */
type ResponseBody<R> = R extends { content: infer C }
  ? 'application/gzip' extends keyof C
    ? Readable
    : C[keyof C]
  : undefined;

/** What a handler answers: one status of the contract, with a body of that status's type. */
export type OperationResponse<K extends OperationId> = {
  [S in keyof ResponsesOf<K>]: ResponseBody<ResponsesOf<K>[S]> extends undefined
    ? { status: S; body?: undefined; headers?: Record<string, string> }
    : { status: S; body: ResponseBody<ResponsesOf<K>[S]>; headers?: Record<string, string> };
}[keyof ResponsesOf<K>];

/** Operations the contract secures get the caller; the others get `undefined`. */
type PrincipalOf<K extends OperationId> = (typeof routes)[K]['security'] extends readonly []
  ? undefined
  : Principal;

export interface HandlerContext<K extends OperationId> {
  /** The signed-in caller, already checked, for every operation that requires a credential. */
  principal: PrincipalOf<K>;
  /** The raw exchange, for the few handlers that need it (client address, streamed uploads). */
  req: Request;
  res: Response;
}

export type Handler<K extends OperationId> = (
  request: OperationRequest<K>,
  context: HandlerContext<K>,
) => OperationResponse<K> | Promise<OperationResponse<K>>;

export interface BindOptions {
  /** Resolves the caller of a secured operation, or throws the 401 problem. */
  authenticate(req: Request): Promise<Principal>;
  /** Middleware that checks a request to the operation against the contract, before its handler. */
  validate?(operationId: OperationId): RequestHandler[];
}

/** Exactly one handler for every operation of the contract: no more, no fewer. */
export type Handlers = { [K in OperationId]: Handler<K> };

async function send(
  res: Response,
  response: { status: PropertyKey; body?: unknown; headers?: Record<string, string> },
): Promise<void> {
  const status = Number(response.status);
  res.status(status);
  for (const [name, value] of Object.entries(response.headers ?? {})) res.setHeader(name, value);
  if (response.body === undefined) {
    res.end();
    return;
  }
  if (response.body instanceof Readable) {
    // A failure half-way ends the exchange: the client sees a short body, not a wrong one. A
    // client that goes away before the end is no fault of the service's.
    await pipeline(response.body, res).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ERR_STREAM_PREMATURE_CLOSE') throw error;
    });
    return;
  }
  if (status >= 400) res.type('application/problem+json');
  res.json(response.body);
}

/** Admin operations answer 403 to anyone else before any check of the request, built or not. */
function requireAdmin(_req: Request, res: Response, next: NextFunction): void {
  if (!(res.locals.principal as Principal | undefined)?.isAdmin) {
    throw new ProblemError(403, 'admins_only', 'Only admins may do this.');
  }
  next();
}

function bindOne<K extends OperationId>(
  router: Router,
  operationId: K,
  handler: Handler<K>,
  options: BindOptions,
): void {
  const route = routes[operationId];
  const secured = route.security.length > 0;
  // The caller first: an anonymous request to a secured operation gets 401, whatever its body.
  const authenticate = async (req: Request, res: Response, next: NextFunction) => {
    res.locals.principal = await options.authenticate(req);
    next();
  };
  const named = (_req: Request, res: Response, next: NextFunction) => {
    setRouteTemplate(res, route.openapiPath);
    next();
  };
  router[route.method](
    route.expressPath,
    named,
    ...(secured ? [authenticate] : []),
    ...(route.adminOnly ? [requireAdmin] : []),
    ...(options.validate?.(operationId) ?? []),
    async (req: Request, res: Response) => {
      const principal = res.locals.principal as PrincipalOf<K>;
      // The validators in front of the handler have checked these against the contract.
      const request = { params: req.params, query: req.query, body: req.body } as OperationRequest<K>;
      const response = await handler(request, { principal, req, res });
      if (!res.headersSent) await send(res, response);
    },
  );
}

/**
 * Registers every handler on `router`, most specific path first (the order of generated/routes.ts),
 * and answers 405 with `Allow` for a path of the contract asked with a method it does not offer.
 * (OPTIONS is answered before, by `crossOrigin`.)
 */
export function bindHandlers(router: Router, handlers: Handlers, options: BindOptions): Router {
  // A request meets only the operations of its method (a HEAD those of GET, which answer it), in
  // the same order: Express tests each route's path in turn, and a GET went past every POST,
  // PATCH and DELETE of the contract before its own.
  const byMethod = new Map<string, Router>();
  for (const operationId of Object.keys(routes) as OperationId[]) {
    const method = routes[operationId].method.toUpperCase();
    let ofMethod = byMethod.get(method);
    if (!ofMethod) {
      ofMethod = express.Router();
      byMethod.set(method, ofMethod);
    }
    bindOne(ofMethod, operationId, handlers[operationId] as Handler<typeof operationId>, options);
  }
  router.use((req: Request, res: Response, next: NextFunction) => {
    const ofMethod = byMethod.get(req.method === 'HEAD' ? 'GET' : req.method);
    if (ofMethod) ofMethod(req, res, next);
    else next();
  });
  for (const [expressPath, { methods }] of methodsByPath()) {
    const allow = allowHeader(methods);
    router.all(expressPath, () => {
      throw new ProblemError(405, 'method_not_allowed', `This path answers ${allow} only.`, {
        headers: { Allow: allow },
      });
    });
  }
  return router;
}
