/** The typed HTTP client of the svc API: openapi-fetch over the generated `paths`, with bearer auth. */
import createClient, { type Client, type Middleware } from 'openapi-fetch';
import type { components, paths } from '../../generated/openapi.ts';

export type { components, paths };
export type ApiClient = Client<paths>;
export type Problem = components['schemas']['Problem'];

export interface ApiClientOptions {
  /** The service's base URL, e.g. `https://svc.example.com`; a trailing `/api/v1` is dropped. */
  baseUrl: string;
  /** The access token, or a function that returns it (read when each request is sent). */
  token?: string | (() => string | undefined);
  /** Sent as `User-Agent` where the platform allows it (Node; browsers forbid the header). */
  userAgent?: string;
  fetch?: typeof globalThis.fetch;
}

/** Adds `Authorization: Bearer …` and the user agent to every request. */
function authMiddleware(options: ApiClientOptions): Middleware {
  return {
    onRequest({ request }) {
      const token = typeof options.token === 'function' ? options.token() : options.token;
      // A request may carry its own credential (a token just minted); that one wins.
      if (token && !request.headers.has('authorization'))
        request.headers.set('authorization', `Bearer ${token}`);
      if (options.userAgent) request.headers.set('user-agent', options.userAgent);
      return request;
    },
  };
}

export function createApiClient(options: ApiClientOptions): ApiClient {
  const client = createClient<paths>({
    baseUrl: serviceBaseUrl(options.baseUrl),
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
  client.use(authMiddleware(options));
  return client;
}

/**
 * The base every contract path (`/api/v1/…`) is appended to. `npm start` prints the API as
 * `http://127.0.0.1:8080/api/v1`, and a base copied from that line would ask for
 * `/api/v1/api/v1/…`, a 404 that names no cause: the SDK takes it to mean the service.
 */
function serviceBaseUrl(baseUrl: string): string {
  return baseUrl.replace(/\/+$/, '').replace(/\/api\/v1$/, '');
}

/** Whether a parsed error body is an RFC 9457 problem of this API. */
export function isProblem(value: unknown): value is Problem {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Problem).status === 'number' &&
    typeof (value as Problem).code === 'string'
  );
}

/** The code of the problem problemOf makes when an error answer is not a problem of this API. */
export const unexpectedResponseCode = 'unexpected_response';

/**
 * What went wrong with one call of the client (openapi-fetch's `{ data, error, response }`), or
 * undefined when the service answered 2xx. A refusal is the service's own problem; an error answer
 * that is not one (a proxy's 502 page) becomes an `unexpected_response` problem that says so, so
 * callers never read `error` themselves.
 */
export function problemOf(result: { error?: unknown; response: Response }): Problem | undefined {
  const { error, response } = result;
  if (response.ok) return undefined;
  if (isProblem(error)) return error;
  const contentType = response.headers.get('content-type') ?? 'no content type';
  return {
    type: 'about:blank',
    title: response.statusText || 'Unexpected response',
    status: response.status,
    code: unexpectedResponseCode,
    detail: `the service answered ${response.status} with ${contentType}, not a problem: check that baseUrl is the svc service`,
  };
}
