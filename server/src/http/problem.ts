/** Domain and HTTP errors as RFC 9457 problems: what every error response of the service is. */
import type { components } from '../../../generated/openapi.ts';
import {
  ConflictError,
  type DomainError,
  ForbiddenError,
  InputError,
  InvalidError,
  NotFoundError,
  TooLargeError,
  TooManyRequestsError,
  UnauthorizedError,
  UnavailableError,
} from '../errors.ts';

export type Problem = components['schemas']['Problem'];

const titles: Record<number, string> = {
  400: 'Invalid request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not found',
  405: 'Method not allowed',
  408: 'Request timeout',
  409: 'Conflict',
  413: 'Payload too large',
  415: 'Unsupported media type',
  422: 'Unprocessable',
  426: 'Upgrade required',
  429: 'Too many requests',
  500: 'Internal server error',
  501: 'Not implemented',
  503: 'Service unavailable',
};

/** Thrown by the HTTP layer, and made from domain errors; the error middleware answers it as problem+json. */
export class ProblemError extends Error {
  override readonly name = 'ProblemError';
  readonly status: number;
  readonly code: string;
  readonly title: string;
  readonly errors: Problem['errors'];
  readonly headers: Record<string, string>;

  constructor(
    status: number,
    code: string,
    detail: string,
    options: { title?: string; errors?: Problem['errors']; headers?: Record<string, string> } = {},
  ) {
    super(detail);
    this.status = status;
    this.code = code;
    this.title = options.title ?? titles[status] ?? 'Error';
    this.errors = options.errors;
    this.headers = options.headers ?? {};
  }

  toProblem(instance: string): Problem {
    return {
      type: `/problems/${this.code}`,
      title: this.title,
      status: this.status,
      detail: this.message,
      code: this.code,
      instance,
      ...(this.errors ? { errors: this.errors } : {}),
    };
  }
}

// Each kind of refusal has one status; a subclass of a kind answers as the kind does.
const statuses: [kind: abstract new (...args: never[]) => DomainError, status: number][] = [
  [InputError, 400],
  [UnauthorizedError, 401],
  [ForbiddenError, 403],
  [NotFoundError, 404],
  [ConflictError, 409],
  [TooLargeError, 413],
  [InvalidError, 422],
  [TooManyRequestsError, 429],
  [UnavailableError, 503],
];

/**
 * The one mapping from a service's refusal to what the client gets; undefined for a kind added
 * without a status here, which is a bug to answer and log as any other.
 */
export function problemFor(error: DomainError): ProblemError | undefined {
  const status = statuses.find(([kind]) => error instanceof kind)?.[1];
  if (status === undefined) return undefined;
  return new ProblemError(status, error.code, error.message, {
    ...(error.title ? { title: error.title } : {}),
    ...(error.errors ? { errors: error.errors } : {}),
    ...(error.retryAfterSeconds !== undefined
      ? { headers: { 'Retry-After': String(error.retryAfterSeconds) } }
      : {}),
    ...(error instanceof UnavailableError ? { headers: { 'Retry-After': '5' } } : {}),
  });
}

/** What requests still running when a stopping service's grace is over are answered. */
export function shuttingDown(): ProblemError {
  return new ProblemError(503, 'shutting_down', 'The service is stopping: try again in a few seconds.', {
    headers: { 'Retry-After': '5' },
  });
}
