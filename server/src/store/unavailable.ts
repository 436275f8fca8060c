/**
 * Which failures mean the store cannot be reached, or is too slow, just now (the request may
 * succeed if tried again: 503), as opposed to a fault of ours (500); and which of them mean the
 * connection a query ran on is gone (another connection may serve it at once).
 */
import knex from 'knex';

// SQLSTATEs (https://www.postgresql.org/docs/current/errcodes-appendix.html) that end the session.
const sessionEndingStates: Record<string, string> = {
  '57P01': 'connection terminated by an administrator',
  '57P02': 'database crashed',
  '57P03': 'database not accepting connections',
  '57P05': 'connection terminated for being idle',
};

// SQLSTATEs of a store that is there but cannot serve just now; the connection stays usable.
const busyStates: Record<string, string> = {
  '57014': 'statement timeout',
  '53300': 'too many connections',
};

// Node's errors on the socket to the database.
const networkCodes = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
  'ENOTFOUND',
]);

// node-postgres's own errors on a connection that is gone, which carry no code.
const lostConnectionMessages = [
  'Connection terminated unexpectedly',
  'Client has encountered a connection error and is not queryable',
];

// node-postgres's errors on a connection that could not be made in time.
const connectTimeoutMessages = ['Connection terminated due to connection timeout', 'timeout expired'];

interface ErrorLike {
  code?: unknown;
  message?: unknown;
  severity?: unknown;
  errors?: unknown;
}

/**
 * The driver's message, if it is one of `messages`: knex puts the failed statement in front of it
 * ("select … - Connection terminated unexpectedly").
 */
function driverMessage(message: unknown, messages: string[]): string | undefined {
  if (typeof message !== 'string') return undefined;
  return messages.find((known) => message === known || message.endsWith(` - ${known}`));
}

/**
 * Why the connection `error` came from is gone (terminated, crashed, cut), when it says so;
 * undefined for any other failure, a statement timeout included. A statement that failed so
 * outside a transaction may be sent again on another connection if it changes nothing.
 */
export function connectionLostReason(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, message } = error as ErrorLike;
  if (typeof code === 'string') {
    if (networkCodes.has(code)) return `network: ${code}`;
    if (code.startsWith('08') && /^[0-9A-Z]{5}$/.test(code)) return `connection exception (${code})`;
    const reason = sessionEndingStates[code];
    if (reason) return `${reason} (${code})`;
  }
  return driverMessage(message, lostConnectionMessages);
}

/** Why the store is unavailable, when `error` says so; undefined for any other failure. */
export function storeUnavailableReason(error: unknown): string | undefined {
  if (error instanceof knex.KnexTimeoutError) {
    return error.message.startsWith('Knex: Timeout acquiring')
      ? 'timed out waiting for a connection'
      : 'query timed out';
  }
  const lost = connectionLostReason(error);
  if (lost) return lost;
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, message, severity, errors } = error as ErrorLike;
  if (typeof code === 'string') {
    const reason = busyStates[code];
    if (reason) return `${reason} (${code})`;
    // 55000 is a fault of ours in a statement; as a FATAL at the start of a session it is a
    // database that takes no connections (ALTER DATABASE … ALLOW_CONNECTIONS false).
    if (code === '55000' && severity === 'FATAL') return `database not accepting connections (${code})`;
  }
  const timedOut = driverMessage(message, connectTimeoutMessages);
  if (timedOut) return timedOut;
  // Connecting to a name with several addresses (localhost: ::1 and 127.0.0.1) fails with all of them.
  if (Array.isArray(errors) && errors.length > 0) {
    const reasons = errors.map(storeUnavailableReason);
    if (reasons.every((reason) => reason !== undefined)) return reasons[0];
  }
  return undefined;
}

/**
 * What to change in DATABASE_URL, when Postgres answered but refused what it names: a database
 * or a user that is not there, a wrong password. Never repeats the password.
 */
export function databaseUrlProblem(databaseUrl: string, error: unknown): string | undefined {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  const url = new URL(databaseUrl);
  const database = decodeURIComponent(url.pathname.slice(1)) || decodeURIComponent(url.username);
  const server = `${url.hostname}:${url.port || 5432}`;
  if (code === '3D000')
    return `DATABASE_URL names the database "${database}", which does not exist on ${server}: create it (createdb -h ${url.hostname} -p ${url.port || 5432} -U ${decodeURIComponent(url.username) || 'postgres'} ${database}) or set DATABASE_URL to a database that exists.`;
  if (code === '28000' || code === '28P01')
    return `DATABASE_URL's user "${decodeURIComponent(url.username)}" cannot sign in to ${server} (${String(message)}): set DATABASE_URL's user and password to an account of that server.`;
  return undefined;
}
