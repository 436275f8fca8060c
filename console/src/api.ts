/**
 * The console's one way to the service: the SDK's typed client on this page's origin, carrying the
 * session's token. A 401 to a request that carried it ends the session.
 */
import { createApiClient, type Problem, problemOf, unexpectedResponseCode } from '@svc/sdk';
import { session } from './session.ts';

export const sessionEndedMessage = 'Your session has ended: sign in again.';

export const api = createApiClient({
  baseUrl: location.origin,
  token: () => session.token(),
  fetch: async (input, init) => {
    const response = await fetch(input, init);
    // A 401 ends the session when the request carried its token, or when the token had run out
    // and so was not sent; a 401 to a sign-in with neither is only a wrong password.
    const carriedToken = input instanceof Request && input.headers.has('authorization');
    if (response.status === 401 && (carriedToken || session.hasExpired())) session.end(sessionEndedMessage);
    return response;
  },
});

export type Outcome<T> = { ok: true; data: T } | { ok: false; problem: Problem };

/** Waits for one call of the client; any refusal, or no answer at all, becomes a problem to show. */
export async function ask<T>(
  call: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<Outcome<T>> {
  try {
    const result = await call;
    const problem = problemOf(result);
    if (!problem) return { ok: true, data: result.data as T };
    if (problem.code !== unexpectedResponseCode) return { ok: false, problem };
    const { status } = result.response;
    return { ok: false, problem: unexpected(status, `The service answered ${status}.`) };
  } catch {
    return {
      ok: false,
      problem: unexpected(0, 'The service did not answer: check that it is running, then try again.'),
    };
  }
}

function unexpected(status: number, detail: string): Problem {
  return { type: 'about:blank', title: 'No answer', status, detail, code: 'no_answer' };
}

/** The field a problem's entry names (`/body/email` → `email`), for showing it next to that field. */
export function fieldErrors(problem: Problem): Record<string, string> {
  const byField: Record<string, string> = {};
  for (const entry of problem.errors ?? []) {
    const field = /^\/body\/([a-z_]+)/.exec(entry.path)?.[1];
    if (field && !byField[field]) byField[field] = readable(entry.message);
  }
  return byField;
}

/** The contract validator's words, said as a person would. */
function readable(message: string): string {
  const fewer = /must NOT have fewer than (\d+) characters/.exec(message);
  if (fewer) return `Use ${fewer[1]} characters or more.`;
  const more = /must NOT have more than (\d+) characters/.exec(message);
  if (more) return `Use ${more[1]} characters or fewer.`;
  if (/must match format "email"/.test(message)) return 'Enter an email address, like ada@example.com.';
  if (/must match format "uri"/.test(message))
    return 'Enter a whole URL, like https://hooks.example.com/svc.';
  if (/must NOT have fewer than 1 items/.test(message)) return 'Choose at least one.';
  if (/must have required property/.test(message)) return 'This is required.';
  return message.charAt(0).toUpperCase() + message.slice(1) + (message.endsWith('.') ? '' : '.');
}
