/**
 * A command's connection to the service: which URL, which token (SVC_TOKEN, else the stored one),
 * the typed client, and the one place where HTTP failures become messages a person can act on.
 */
import { type ApiClient, createApiClient, type Problem, problemOf, unexpectedResponseCode } from '@svc/sdk';
import { defaultApiUrl, type SvcContext } from './context.ts';
import { AuthenticationNeeded, CliError, ExitCode } from './errors.ts';
import { openTokenStore, resolveToken, type TokenSource, type TokenStore } from './token-store.ts';
import { userAgent } from './version.ts';

export interface Session {
  apiUrl: string;
  client: ApiClient;
  store: TokenStore;
  token: { value: string; source: TokenSource } | undefined;
  /** The service the stored token is for, when it is not the one this command talks to. */
  signedInElsewhere: string | undefined;
}

function normalizeUrl(raw: string, from: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new CliError(`${from} is not a URL: "${raw}" (for example http://127.0.0.1:8080)`, ExitCode.usage);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new CliError(`${from} must be an http or https URL, not "${raw}"`, ExitCode.usage);
  }
  // The service prints its API as <base>/api/v1; people paste that.
  return url.href.replace(/\/+$/, '').replace(/\/api\/v1$/, '');
}

/** The token store in the context's home; its one-time warning goes to stderr. */
export function openContextTokenStore(context: SvcContext): Promise<TokenStore> {
  return openTokenStore({
    home: context.home,
    warn: (message) => context.stderr.write(`svc: ${message}\n`),
    keyring: context.keyring,
  });
}

export async function openSession(context: SvcContext, apiUrlOption: string | undefined): Promise<Session> {
  const store = await openContextTokenStore(context);
  const resolved = await resolveToken(context.env, store);
  // --api-url, else SVC_API_URL, else the service the stored token is for, else a local service.
  const apiUrl = apiUrlOption
    ? normalizeUrl(apiUrlOption, '--api-url')
    : context.env.SVC_API_URL
      ? normalizeUrl(context.env.SVC_API_URL, 'SVC_API_URL')
      : (resolved?.credential?.api_url ?? defaultApiUrl);
  // A stored token goes only to the service that minted it, never to whatever URL was typed.
  const storedFor = resolved?.credential?.api_url;
  const usable = resolved && (resolved.source === 'SVC_TOKEN' || storedFor === apiUrl);
  const token = usable ? { value: resolved.token, source: resolved.source } : undefined;
  const client = createApiClient({ baseUrl: apiUrl, token: () => token?.value, userAgent });
  return { apiUrl, client, store, token, signedInElsewhere: usable ? undefined : storedFor };
}

/** The session's token, or exit 4 with what to do. */
export function requireToken(session: Session): string {
  if (session.token) return session.token.value;
  if (session.signedInElsewhere) {
    throw new AuthenticationNeeded(
      `you are signed in to ${session.signedInElsewhere}, not ${session.apiUrl}: run \`svc login --api-url ${session.apiUrl}\`.`,
    );
  }
  throw new AuthenticationNeeded('You are not signed in: run `svc login` (or set SVC_TOKEN).');
}

/** What to do about a refused token depends on where it came from. */
export function refusedTokenMessage(session: Session): string {
  if (session.token?.source === 'SVC_TOKEN') {
    return 'the token in SVC_TOKEN is not valid or has expired: set a fresh one, or unset SVC_TOKEN to use your own sign-in.';
  }
  return 'Your session has expired or is not valid: run `svc login`.';
}

interface FetchResult<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/** What a command adds to a refusal of the service: the next step, for the problem's code. */
export type Advice = (problem: Problem, status: number) => string | undefined;

/**
 * The body of a successful call, or a CliError that says what went wrong and what to do. A refusal
 * is told by the service's own detail; `advice` may add the command that would help, on a line of
 * its own.
 */
export async function expectOk<T>(
  session: Session,
  call: Promise<FetchResult<T>>,
  advice?: Advice,
): Promise<T> {
  const { apiUrl } = session;
  let result: FetchResult<T>;
  try {
    result = await call;
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code;
    throw new CliError(
      `cannot reach the svc service at ${apiUrl}${cause ? ` (${cause})` : ''}: is it running, and is the URL right? ` +
        'Set it with --api-url or SVC_API_URL.',
    );
  }
  const refusal = problemOf(result);
  if (!refusal) return result.data as T;
  const { response } = result;
  // An answer that is not the service's problem (a proxy's page) is told by its status alone.
  const problem = refusal.code === unexpectedResponseCode ? undefined : refusal;
  switch (response.status) {
    case 401:
      throw new AuthenticationNeeded(refusedTokenMessage(session));
    case 426:
      // The service's detail names the versions and says to run `svc upgrade`.
      throw new CliError(problem?.detail ?? 'this svc is too old for the service: run `svc upgrade`.');
    case 429: {
      const retryAfter = response.headers.get('retry-after');
      throw new CliError(
        `too many attempts: try again ${retryAfter ? `in ${retryAfter} seconds` : 'in a minute'}.`,
      );
    }
    default: {
      if (!problem) throw new CliError(`the service answered HTTP ${response.status}`);
      const next = advice?.(problem, response.status);
      throw new CliError(
        `${problem.detail} (${problem.code}, HTTP ${response.status})${next ? `\n  ${next}` : ''}`,
      );
    }
  }
}
