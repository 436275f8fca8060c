/**
 * The one error middleware: every failure becomes `application/problem+json` with a stable
 * `code`. Never a stack trace or an HTML page; a store that is unreachable or too slow is a 503
 * to try again, logged once at warn; unexpected errors are logged for the operator and answered
 * with a plain 500.
 */
import type { NextFunction, Request, Response } from 'express';
import { multilineTextPatternSource, textPatternSource } from '../../../generated/patterns.ts';
import type { Logger } from '../logger.ts';
import { storeUnavailableReason } from '../store/unavailable.ts';
import { ProblemError } from './problem.ts';

/** What a 503 asks clients to wait, in seconds: about as long as a database takes to fail over. */
export const storeRetryAfterSeconds = 5;

interface HttpishError {
  status?: number;
  statusCode?: number;
  type?: string;
  expose?: boolean;
  errors?: { path?: string; message?: string }[];
  headers?: Record<string, string>;
  message?: string;
}

const validatorCodes: Record<number, string> = {
  400: 'validation_failed',
  404: 'not_found',
  405: 'method_not_allowed',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
};

// The validator names a broken pattern by its source; these are the contract's two text rules.
const textRuleMessages = new Set(
  [textPatternSource, multilineTextPatternSource].map((source) => `must match pattern "${source}"`),
);
const textRuleBroken = 'must not hold control characters';

/** `.body.public_key` / `/body/public_key` → `/body/public_key`. */
function pointer(path: string | undefined): string {
  return `/${(path ?? '').replace(/^[./]+/, '').replaceAll('.', '/')}`;
}

function toProblemError(error: unknown, limitBytes: number): ProblemError | undefined {
  if (error instanceof ProblemError) return error;
  const e = (error ?? {}) as HttpishError;
  const status = e.status ?? e.statusCode;
  if (typeof status !== 'number' || status < 400 || status >= 500) return undefined;
  // body-parser (express.json)
  if (e.type === 'entity.parse.failed') {
    return new ProblemError(400, 'malformed_json', 'The request body is not valid JSON.');
  }
  if (e.type === 'entity.too.large') {
    return new ProblemError(413, 'payload_too_large', `The request body is larger than ${limitBytes} bytes.`);
  }
  // express-openapi-validator
  const code = validatorCodes[status];
  if (!code) return undefined;
  const errors = e.errors?.map((item) => ({
    path: pointer(item.path),
    message: textRuleMessages.has(item.message ?? '') ? textRuleBroken : (item.message ?? 'is not valid'),
  }));
  // Well-formed JSON whose only fault is a control character in free text is unprocessable
  // content, not a malformed request: 422, as the contract's Text schema says.
  if (status === 400 && errors?.length && errors.every((item) => item.message === textRuleBroken)) {
    return new ProblemError(
      422,
      'invalid_text',
      errors.map((item) => `${item.path} ${item.message}`).join('; '),
      { errors },
    );
  }
  const detail =
    status === 400 && errors?.length
      ? errors.map((item) => `${item.path} ${item.message}`).join('; ')
      : status === 404
        ? 'There is no such route: see /docs for the API.'
        : (e.message ?? 'The request cannot be accepted.');
  return new ProblemError(status, code, detail, {
    ...(status === 400 && errors?.length ? { errors } : {}),
    ...(e.headers ? { headers: e.headers } : {}),
  });
}

export function problemMiddleware(options: { logger: Logger; jsonLimitBytes: number }) {
  return (error: unknown, req: Request, res: Response, _next: NextFunction): void => {
    if ((error as { code?: string }).code === 'ECONNRESET' && req.socket.destroyed) {
      // The client went away (an upload cancelled): no one to answer, and nothing went wrong here.
      // (A reset of the store's connection, with the client still there, is a 503 below.)
      options.logger.info('client closed the request', { method: req.method, path: req.path });
      return;
    }
    let problem = toProblemError(error, options.jsonLimitBytes);
    const unavailable = problem ? undefined : storeUnavailableReason(error);
    if (unavailable) {
      options.logger.warn('store unavailable: answered 503', {
        method: req.method,
        path: req.path,
        reason: unavailable,
      });
      problem = new ProblemError(
        503,
        'service_unavailable',
        'The service cannot reach its store just now: try again in a few seconds.',
        { headers: { 'Retry-After': String(storeRetryAfterSeconds) } },
      );
    }
    if (!problem) {
      options.logger.error('request failed', { method: req.method, path: req.path, error });
      problem = new ProblemError(
        500,
        'internal_error',
        'Something went wrong on our side; it has been logged.',
      );
    }
    if (res.headersSent) {
      res.end();
      return;
    }
    for (const [name, value] of Object.entries(problem.headers)) res.setHeader(name, value);
    if (problem.status === 401) res.setHeader('WWW-Authenticate', 'Bearer');
    res
      .status(problem.status)
      .type('application/problem+json')
      .json(problem.toProblem(instancePath(req)));
  };
}

/** The path the problem is about, never its query: that may hold a presigned URL's signature or a token. */
function instancePath(req: Request): string {
  try {
    return new URL(req.originalUrl, 'http://instance.invalid').pathname;
  } catch {
    return '/';
  }
}

/** Routes nobody serves. */
export function notFound(_req: Request, _res: Response, next: NextFunction): void {
  next(new ProblemError(404, 'not_found', 'There is no such route: see /docs for the API.'));
}
