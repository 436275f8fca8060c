/**
 * The refusals services and repositories throw, by what went wrong rather than by how it is
 * answered: `server/src/http/` alone turns them into problem+json (as backstage's
 * `@backstage/errors` keeps its errors apart from its error handler). Each carries a stable
 * `code`, the one users and programs see, and a message that says what to do about it.
 */

/** One field of the input that is wrong: where it is (a JSON pointer) and why. */
export interface FieldError {
  path: string;
  message: string;
}

export interface DomainErrorOptions {
  /** A short summary of this kind of refusal, when the kind's own is too broad ("Invalid package"). */
  title?: string | undefined;
  /** One entry per field of the input that is wrong. */
  errors?: FieldError[] | undefined;
  /** When asking again will be taken, in seconds (`Retry-After`): for a refusal that time ends. */
  retryAfterSeconds?: number | undefined;
}

/** A refusal of what was asked: the asker's to fix, never the service's fault. */
export abstract class DomainError extends Error {
  readonly code: string;
  readonly title: string | undefined;
  readonly errors: FieldError[] | undefined;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: string, message: string, options: DomainErrorOptions = {}) {
    super(message);
    this.code = code;
    this.title = options.title;
    this.errors = options.errors;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

/** The input breaks a rule of its form that the contract could not say (a blank name). */
export class InputError extends DomainError {
  override readonly name = 'InputError';
}

/** No valid credential: the asker must sign in (again). */
export class UnauthorizedError extends DomainError {
  override readonly name = 'UnauthorizedError';
}

/** The asker is known, and may not do this. */
export class ForbiddenError extends DomainError {
  override readonly name = 'ForbiddenError';
}

/** What was asked about does not exist, or not for this asker. */
export class NotFoundError extends DomainError {
  override readonly name = 'NotFoundError';
}

/** What was asked clashes with the state things are in (taken, used, submitted already). */
export class ConflictError extends DomainError {
  override readonly name = 'ConflictError';
}

/** The content is larger than this service takes. */
export class TooLargeError extends DomainError {
  override readonly name = 'TooLargeError';
}

/** Well-formed input the service cannot take (a package that is not one, a key of another kind). */
export class InvalidError extends DomainError {
  override readonly name = 'InvalidError';
}

/** Too many attempts of late: the asker may try again once `retryAfterSeconds` have passed. */
export class TooManyRequestsError extends DomainError {
  override readonly name = 'TooManyRequestsError';
  declare readonly retryAfterSeconds: number;

  constructor(code: string, message: string, retryAfterSeconds: number, options: DomainErrorOptions = {}) {
    super(code, message, { ...options, retryAfterSeconds });
  }
}

/** A part the service needs (the broker, the key-value store) does not answer just now: try again. */
export class UnavailableError extends DomainError {
  override readonly name = 'UnavailableError';
}

/** The one "sign in again" of the service: it never says which part of a credential was wrong. */
export function unauthorized(
  detail = 'Your session has expired or is not valid: sign in again (`svc login`, the web console at /console, or POST /api/v1/account/sessions).',
): UnauthorizedError {
  return new UnauthorizedError('unauthorized', detail);
}
