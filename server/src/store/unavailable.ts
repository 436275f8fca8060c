/**
 * Which failures mean the store cannot be reached, or is too slow, just now (the request may
 * succeed if tried again: 503), as opposed to a fault of ours (500).
 */
import knex from 'knex';

// SQLSTATEs (https://www.postgresql.org/docs/current/errcodes-appendix.html).
const unavailableStates: Record<string, string> = {
  '57014': 'statement timeout',
  '57P01': 'connection terminated by an administrator',
  '57P02': 'database crashed',
  '57P03': 'database not accepting connections',
  '57P05': 'connection terminated for being idle',
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

// node-postgres's own errors, which carry no code.
const driverMessages = new Set([
  'Connection terminated unexpectedly',
  'Connection terminated due to connection timeout',
  'timeout expired',
  'Client has encountered a connection error and is not queryable',
]);

interface ErrorLike {
  code?: unknown;
  message?: unknown;
  errors?: unknown;
}

/** Why the store is unavailable, when `error` says so; undefined for any other failure. */
export function storeUnavailableReason(error: unknown): string | undefined {
  if (error instanceof knex.KnexTimeoutError) {
    return error.message.startsWith('Knex: Timeout acquiring')
      ? 'timed out waiting for a connection'
      : 'query timed out';
  }
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, message, errors } = error as ErrorLike;
  if (typeof code === 'string') {
    if (networkCodes.has(code)) return `network: ${code}`;
    if (/^[0-9A-Z]{5}$/.test(code)) {
      if (code.startsWith('08')) return `connection exception (${code})`;
      const reason = unavailableStates[code];
      return reason && `${reason} (${code})`;
    }
  }
  if (typeof message === 'string' && driverMessages.has(message)) return message;
  // Connecting to a name with several addresses (localhost: ::1 and 127.0.0.1) fails with all of them.
  if (Array.isArray(errors) && errors.length > 0) {
    const reasons = errors.map(storeUnavailableReason);
    if (reasons.every((reason) => reason !== undefined)) return reasons[0];
  }
  return undefined;
}
