/**
 * The `Idempotency-Key` header, on the operations whose retry must not do a thing twice. They are
 * listed once, below; each one's handler is wrapped, whatever it is. A request with a key runs
 * once: a retry with the same key and request within 24 hours gets the first answer again (with
 * `Idempotent-Replayed: true`), as the contract says.
 *
 * Kept: what the operation answered, a refusal (4xx) as much as a success, since a retry must
 * not run it again (a wrong pairing code would cost a second try). Not kept, so that a retry
 * runs: a server failure (5xx, a 501 included) and the refusals that say "try again later" (408,
 * 429). Whatever is answered before the handler runs (401, the contract's 400, 413, 415) never
 * reaches here: no key is claimed for it.
 */
import { createHash } from 'node:crypto';
import type { Request } from 'express';
import type { operations } from '../../../generated/openapi.ts';
import type { OperationId } from '../../../generated/routes.ts';
import type { Principal } from '../auth/principal.ts';
import { DomainError } from '../errors.ts';
import type { IdempotencyService, KeptAnswer } from '../idempotency/idempotency-service.ts';
import type { Handler, Handlers, OperationRequest, OperationResponse } from './bind-handlers.ts';
import { instancePath } from './errors.ts';
import { ProblemError, problemFor } from './problem.ts';

type HeaderOf<K extends OperationId> = NonNullable<operations[K]['parameters']['header']>;

/** The operations whose contract takes an `Idempotency-Key` header. */
export type IdempotentOperation = {
  [K in OperationId]: [HeaderOf<K>] extends [never]
    ? never
    : 'Idempotency-Key' extends keyof HeaderOf<K>
      ? K
      : never;
}[OperationId];

/**
 * Each operation the contract gives the header, and no other: one the contract adds, or drops,
 * does not compile until it is listed here, or taken out.
 */
const idempotentOperations: Record<IdempotentOperation, true> = {
  pairCar: true,
  transferCar: true,
  createCarCommand: true,
  submitMiniApp: true,
};

/** The headers of an answer that a replay gives again; the others are the moment's own. */
const keptHeaders = ['location'];

/** Sent with an answer given again. */
export const replayedHeader = 'Idempotent-Replayed';

/** JSON with every object's keys in order, so that one request has one fingerprint. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((name) => `${JSON.stringify(name)}:${canonicalJson((value as Record<string, unknown>)[name])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/** What makes two requests the same: the operation, its path (decoded) and query, and its body. */
export function requestFingerprint(
  operationId: OperationId,
  request: { params: unknown; query: unknown; body: unknown },
): string {
  return createHash('sha256')
    .update(canonicalJson([operationId, request.params, request.query, request.body]))
    .digest('hex');
}

/** Whether a retry must get this answer again rather than run the operation again. */
function kept(status: number): boolean {
  return status < 500 && status !== 408 && status !== 429;
}

function keptHeadersOf(headers: Record<string, string> | undefined): Record<string, string> {
  return Object.fromEntries(
    Object.entries(headers ?? {}).filter(([name]) => keptHeaders.includes(name.toLowerCase())),
  );
}

/** A refusal thrown by the operation, as the error middleware will answer it; else undefined. */
function refusal(error: unknown, req: Request): KeptAnswer | undefined {
  const problem =
    error instanceof ProblemError ? error : error instanceof DomainError ? problemFor(error) : undefined;
  if (!problem) return undefined;
  return {
    status: problem.status,
    body: problem.toProblem(instancePath(req)),
    headers: keptHeadersOf(problem.headers),
  };
}

function idempotent<K extends IdempotentOperation>(
  operationId: K,
  handler: Handler<K>,
  keys: IdempotencyService,
): Handler<K> {
  return async (request, context) => {
    // The contract checked its form (1 to 255 printable ASCII characters) before this runs.
    const key = context.req.get('idempotency-key');
    if (key === undefined) return handler(request, context);
    const principal = context.principal as Principal | undefined;
    if (!principal)
      throw new Error(`${operationId} takes an Idempotency-Key but no caller: keys are per account`);
    const begun = await keys.begin({
      accountId: principal.accountId,
      key,
      operation: operationId,
      fingerprint: requestFingerprint(operationId, request as OperationRequest<K>),
    });
    if (begun.kind === 'replay') {
      const { status, body, headers } = begun.answer;
      return { status, body, headers: { ...headers, [replayedHeader]: 'true' } } as OperationResponse<K>;
    }
    // What was done is answered even when the store cannot keep the answer or let the key go:
    // the key is then left `running`, goes stale, and a retry takes it over later.
    const settle = (answer: KeptAnswer | undefined) =>
      (answer && kept(answer.status) ? begun.finish(answer) : begun.release()).catch(() => {});
    let response: OperationResponse<K>;
    try {
      response = await handler(request, context);
    } catch (error) {
      await settle(refusal(error, context.req));
      throw error;
    }
    await settle({
      status: Number(response.status),
      body: response.body,
      headers: keptHeadersOf(response.headers),
    });
    return response;
  };
}

/** `handlers`, with each operation that takes an `Idempotency-Key` answering to it. */
export function withIdempotencyKeys(handlers: Handlers, keys: IdempotencyService): Handlers {
  const wrapped: Partial<Handlers> = {};
  for (const operationId of Object.keys(idempotentOperations) as IdempotentOperation[]) {
    wrapped[operationId] = idempotent(
      operationId,
      handlers[operationId] as Handler<typeof operationId>,
      keys,
    ) as never;
  }
  return { ...handlers, ...wrapped };
}
