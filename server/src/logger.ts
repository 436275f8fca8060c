/**
 * What the operator reads: one JSON object per line on stderr. Never given tokens, passwords or
 * request bodies.
 */
export interface Logger {
  info(message: string, fields?: Record<string, unknown>): void;
  /** Something the operator should know of that is not a bug here (the store unreachable). */
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

function serialize(value: unknown): unknown {
  if (value instanceof Error) return { name: value.name, message: value.message, stack: value.stack };
  return value;
}

export function createLogger(write: (line: string) => void = (line) => process.stderr.write(line)): Logger {
  const log = (level: string, message: string, fields: Record<string, unknown> = {}) => {
    const entries = Object.entries(fields).map(([key, value]) => [key, serialize(value)]);
    write(
      `${JSON.stringify({ time: new Date().toISOString(), level, message, ...Object.fromEntries(entries) })}\n`,
    );
  };
  return {
    info: (message, fields) => log('info', message, fields),
    warn: (message, fields) => log('warn', message, fields),
    error: (message, fields) => log('error', message, fields),
  };
}

export const silentLogger: Logger = { info() {}, warn() {}, error() {} };
