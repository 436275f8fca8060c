import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, beforeAll, describe, test } from 'vitest';
import * as errors from '../src/errors.ts';
import {
  ConflictError,
  DomainError,
  ForbiddenError,
  InputError,
  InvalidError,
  NotFoundError,
  TooLargeError,
  TooManyRequestsError,
  UnauthorizedError,
  UnavailableError,
  unauthorized,
} from '../src/errors.ts';
import { problemMiddleware } from '../src/http/errors.ts';
import { problemFor } from '../src/http/problem.ts';
import { silentLogger } from '../src/logger.ts';

const instance = '/api/v1/somewhere';

function answered(error: DomainError) {
  const problem = problemFor(error);
  assert.ok(problem, `${error.name} has no status`);
  return { body: problem.toProblem(instance), headers: problem.headers };
}

describe('a domain error as the client gets it', () => {
  const kinds: [error: DomainError, status: number, title: string][] = [
    [new InputError('validation_failed', 'The name must not be blank.'), 400, 'Invalid request'],
    [new UnauthorizedError('unauthorized', 'Sign in again.'), 401, 'Unauthorized'],
    [new ForbiddenError('admins_only', 'Only admins see the review queue.'), 403, 'Forbidden'],
    [new NotFoundError('key_not_found', 'No SSH key with id k1 is registered.'), 404, 'Not found'],
    [new ConflictError('email_taken', 'An account with that email exists already.'), 409, 'Conflict'],
    [new TooLargeError('package_too_large', 'The package is too large.'), 413, 'Payload too large'],
    [new InvalidError('sha256_mismatch', "The package's sha256 is not the one asked."), 422, 'Unprocessable'],
    [
      new TooManyRequestsError('rate_limited', 'Too many sign-ins. Try again in 7 seconds.', 7),
      429,
      'Too many requests',
    ],
    [
      new UnavailableError('key_value_store_unavailable', 'The key-value store does not answer just now.'),
      503,
      'Service unavailable',
    ],
  ];

  for (const [error, status, title] of kinds) {
    test(`when a service throws ${error.name} then the client gets ${status} with its code and message`, () => {
      assert.deepEqual(answered(error).body, {
        type: `/problems/${error.code}`,
        title,
        status,
        detail: error.message,
        code: error.code,
        instance,
      });
    });
  }

  test('when every kind of domain error is listed then each has a status', () => {
    const kindsInModule = Object.values(errors).filter(
      (value): value is typeof DomainError =>
        typeof value === 'function' && value.prototype instanceof DomainError,
    );
    assert.deepEqual(
      kindsInModule.map((kind) => kind.name).sort(),
      kinds.map(([error]) => error.constructor.name).sort(),
    );
  });

  test('when the error names the wrong fields then the problem lists them', () => {
    const fields = [{ path: '/body/name', message: 'must not be blank' }];
    const { body } = answered(
      new InputError('validation_failed', 'The name must not be blank.', { errors: fields }),
    );
    assert.deepEqual(body.errors, fields);
  });

  test('when the error has a title of its own then the problem carries it instead of the status title', () => {
    const { body } = answered(
      new InvalidError('not_gzip', 'The package is not gzip-compressed.', { title: 'Invalid package' }),
    );
    assert.equal(body.title, 'Invalid package');
    assert.equal(body.status, 422);
  });

  test('when a part the service needs does not answer then Retry-After says to try again in 5 seconds', () => {
    assert.deepEqual(answered(new UnavailableError('broker_unavailable', 'Wait.')).headers, {
      'Retry-After': '5',
    });
  });

  test('when the refusal is too many requests then Retry-After says when to try again', () => {
    assert.deepEqual(answered(new TooManyRequestsError('rate_limited', 'Wait.', 42)).headers, {
      'Retry-After': '42',
    });
  });

  test('when the refusal is any other kind then no header is added', () => {
    assert.deepEqual(answered(new ConflictError('upload_used', 'Used already.')).headers, {});
  });

  test('when the credential is not valid then the one 401 does not say which part was wrong', () => {
    const { body } = answered(unauthorized());
    assert.equal(body.code, 'unauthorized');
    assert.equal(
      body.detail,
      'Your session has expired or is not valid: sign in again (`svc login`, the web console at /console, or POST /api/v1/account/sessions).',
    );
  });

  test('when a kind of domain error has no status then there is no problem for it', () => {
    class UnmappedError extends DomainError {}
    assert.equal(problemFor(new UnmappedError('unmapped', 'No status.')), undefined);
  });

  test('when a subclass of a kind is thrown then it answers as its kind', () => {
    class PackageMissingError extends NotFoundError {}
    assert.equal(answered(new PackageMissingError('package_missing', 'Gone.')).body.status, 404);
  });
});

describe('a domain error thrown in a route', () => {
  let base = '';
  let server: ReturnType<ReturnType<typeof express>['listen']>;
  let thrown: unknown;

  beforeAll(async () => {
    const app = express();
    app.get('/refused', () => {
      throw thrown;
    });
    app.use(problemMiddleware({ logger: silentLogger, jsonLimitBytes: 1024 }));
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(() => new Promise((resolve) => server.close(resolve)));

  async function answer(error: unknown) {
    thrown = error;
    const response = await fetch(`${base}/refused?secret=1`);
    return {
      status: response.status,
      headers: response.headers,
      body: (await response.json()) as Record<string, unknown>,
    };
  }

  test('when it is too many requests then the answer is 429 problem+json with Retry-After', async () => {
    const reply = await answer(new TooManyRequestsError('rate_limited', 'Wait 3 seconds.', 3));
    assert.equal(reply.status, 429);
    assert.match(String(reply.headers.get('content-type')), /^application\/problem\+json/);
    assert.equal(reply.headers.get('retry-after'), '3');
    assert.deepEqual(reply.body, {
      type: '/problems/rate_limited',
      title: 'Too many requests',
      status: 429,
      detail: 'Wait 3 seconds.',
      code: 'rate_limited',
      instance: '/refused',
    });
  });

  test('when the credential is not valid then the answer is 401 asking for a bearer token', async () => {
    const reply = await answer(unauthorized());
    assert.equal(reply.status, 401);
    assert.equal(reply.headers.get('www-authenticate'), 'Bearer');
    assert.equal(reply.body.code, 'unauthorized');
  });

  test('when its kind has no status then the answer is a plain 500, as for any bug', async () => {
    class UnmappedError extends DomainError {}
    const reply = await answer(new UnmappedError('unmapped', 'No status.'));
    assert.equal(reply.status, 500);
    assert.equal(reply.body.code, 'internal_error');
  });
});
