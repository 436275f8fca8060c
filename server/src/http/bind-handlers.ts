/**
 * Binds one handler per operationId of the contract to an Express router. The types come from
 * generated/openapi.ts and the paths from generated/routes.ts, so a new operation in the contract
 * is a compile error until it has a handler, and a handler for an operation the contract lacks,
 * or one answering with a status or body the contract does not allow, does not compile either.
 */
import type { Request, Response, Router } from 'express';
import type { operations } from '../../../generated/openapi.ts';
import { type OperationId, routes } from '../../../generated/routes.ts';

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
type ResponseBody<R> = R extends { content: infer C } ? C[keyof C] : undefined;

/** What a handler answers: one status of the contract, with a body of that status's type. */
export type OperationResponse<K extends OperationId> = {
  [S in keyof ResponsesOf<K>]: ResponseBody<ResponsesOf<K>[S]> extends undefined
    ? { status: S; body?: undefined; headers?: Record<string, string> }
    : { status: S; body: ResponseBody<ResponsesOf<K>[S]>; headers?: Record<string, string> };
}[keyof ResponsesOf<K>];

/** The raw exchange, for the few handlers that stream (package uploads). */
export interface HandlerContext {
  req: Request;
  res: Response;
}

export type Handler<K extends OperationId> = (
  request: OperationRequest<K>,
  context: HandlerContext,
) => OperationResponse<K> | Promise<OperationResponse<K>>;

/** Exactly one handler for every operation of the contract: no more, no fewer. */
export type Handlers = { [K in OperationId]: Handler<K> };

function send(
  res: Response,
  response: { status: PropertyKey; body?: unknown; headers?: Record<string, string> },
) {
  const status = Number(response.status);
  res.status(status);
  for (const [name, value] of Object.entries(response.headers ?? {})) res.setHeader(name, value);
  if (response.body === undefined) {
    res.end();
    return;
  }
  if (status >= 400) res.type('application/problem+json');
  res.json(response.body);
}

function bindOne<K extends OperationId>(router: Router, operationId: K, handler: Handler<K>): void {
  const route = routes[operationId];
  router[route.method](route.expressPath, async (req: Request, res: Response) => {
    // The request validator in front of the router has checked these against the contract.
    const request = { params: req.params, query: req.query, body: req.body } as OperationRequest<K>;
    const response = await handler(request, { req, res });
    if (!res.headersSent) send(res, response);
  });
}

/** Registers every handler on `router`, most specific path first (the order of generated/routes.ts). */
export function bindHandlers(router: Router, handlers: Handlers): Router {
  for (const operationId of Object.keys(routes) as OperationId[]) {
    bindOne(router, operationId, handlers[operationId] as Handler<typeof operationId>);
  }
  return router;
}
