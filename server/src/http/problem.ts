/** Domain and HTTP errors as RFC 9457 problems: what every error response of the service is. */
import type { components } from '../../../generated/openapi.ts';

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

/** Thrown by services and handlers; the error middleware turns it into a problem+json response. */
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

/** The one 401 of the service: it never says which part of a credential was wrong. */
export function unauthorized(
  detail = 'Your session has expired or is not valid: sign in again (`svc login`, or the web console).',
): ProblemError {
  return new ProblemError(401, 'unauthorized', detail);
}
