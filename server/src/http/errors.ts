/**
 * The one error middleware: every failure becomes `application/problem+json` with a stable
 * `code`. Never a stack trace or an HTML page; a store that is unreachable or too slow is a 503
 * to try again, logged once at warn; unexpected errors are logged for the operator and answered
 * with a plain 500.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import { brands } from '../../../generated/brands.ts';
import { multilineTextPatternSource, textPatternSource } from '../../../generated/patterns.ts';
import { DomainError } from '../errors.ts';
import type { Logger } from '../logger.ts';
import { storeUnavailableReason } from '../store/unavailable.ts';
import { ProblemError, problemFor } from './problem.ts';
import { requestFields } from './request-log.ts';

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

/** The validator's words, where they would puzzle a person. */
function validatorMessage(message: string | undefined): string {
  if (message === undefined) return 'is not valid';
  if (textRuleMessages.has(message)) return textRuleBroken;
  return message;
}

const isUnknownBrand = (item: { path: string; message: string }) =>
  /^\/body\/(.+\/)?brand$/.test(item.path) &&
  item.message.startsWith('must be equal to one of the allowed values');

/** `.body.public_key` / `/body/public_key` → `/body/public_key`. */
function pointer(path: string | undefined): string {
  return `/${(path ?? '').replace(/^[./]+/, '').replaceAll('.', '/')}`;
}

function toProblemError(error: unknown, limitBytes: number): ProblemError | undefined {
  if (error instanceof ProblemError) return error;
  if (error instanceof DomainError) return problemFor(error);
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
    message: validatorMessage(item.message),
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
  // A brand the contract does not know, in a body, is the device-id rule's 422 (as in an id).
  if (status === 400 && errors?.length && errors.every(isUnknownBrand)) {
    return new ProblemError(
      422,
      'unknown_brand',
      `${errors.map((item) => item.path).join(', ')} names no known brand: use one of ${brands.join(', ')}.`,
      { title: 'Invalid device id', errors },
    );
  }
  if (status === 415) {
    return new ProblemError(
      415,
      code,
      `${e.message && !e.message.endsWith('undefined') ? e.message : 'The request has a body but no Content-Type'}: send the body as JSON, with Content-Type: application/json.`,
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
      options.logger.info('client closed the request', requestFields(req, res));
      return;
    }
    let problem = toProblemError(error, options.jsonLimitBytes);
    const unavailable = problem ? undefined : storeUnavailableReason(error);
    if (unavailable) {
      options.logger.warn('store unavailable: answered 503', {
        ...requestFields(req, res),
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
      options.logger.error('request failed', { ...requestFields(req, res), error });
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
    closeWhileBodyArrives(req, res);
    for (const [name, value] of Object.entries(problem.headers)) res.setHeader(name, value);
    // Every 401 names the scheme to use (RFC 9110 §11.6.1); a refused token says so itself.
    if (problem.status === 401 && !res.hasHeader('WWW-Authenticate'))
      res.setHeader('WWW-Authenticate', 'Bearer');
    res
      .status(problem.status)
      .type('application/problem+json')
      .json(problem.toProblem(instancePath(req)));
  };
}

/** Whether part of the request's body has yet to arrive. */
export function bodyStillArriving(req: IncomingMessage): boolean {
  if (req.complete) return false;
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && Number(length) > 0);
}

/**
 * An answer given while the body is still arriving closes the connection once it is out: the rest
 * of the body is never read (a 413 does not wait for the 20 MiB it refuses, a 401 for a body it
 * will not look at), and whatever was reading the request stops.
 */
function closeWhileBodyArrives(req: IncomingMessage, res: ServerResponse): void {
  if (!bodyStillArriving(req)) return;
  res.setHeader('Connection', 'close');
  res.once('close', () => {
    if (!req.complete) req.destroy();
  });
}

/**
 * Answers `problem` from outside the middleware chain (a deadline, a stopping service), and closes
 * the connection: the handler may still be running, and what it does later no longer reaches the
 * client. Once an answer is under way, or the client cannot hear one, the connection is just cut.
 */
export function answerAndClose(req: IncomingMessage, res: ServerResponse, problem: ProblemError): void {
  if (res.headersSent || !req.socket.writable) {
    req.socket.destroy();
    return;
  }
  closeWhileBodyArrives(req, res);
  const body = JSON.stringify(problem.toProblem(instancePath(req)));
  for (const [name, value] of Object.entries(problem.headers)) res.setHeader(name, value);
  res.statusCode = problem.status;
  res.setHeader('Content-Type', 'application/problem+json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.setHeader('Connection', 'close');
  res.end(body);
}

/** The path the problem is about, never its query: that may hold a presigned URL's signature or a token. */
export function instancePath(req: IncomingMessage & { originalUrl?: string }): string {
  try {
    return new URL(req.originalUrl ?? req.url ?? '/', 'http://instance.invalid').pathname;
  } catch {
    return '/';
  }
}

/** Routes nobody serves. */
export function notFound(_req: Request, _res: Response, next: NextFunction): void {
  next(new ProblemError(404, 'not_found', 'There is no such route: see /docs for the API.'));
}
