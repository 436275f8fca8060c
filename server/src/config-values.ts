/**
 * How the text of one environment variable becomes a setting's value: each parser checks the
 * value alone and names the variable in what it refuses. Checks across settings live in config.ts.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** How this start reads forms on their way out (a former name, a duration without its unit). */
export interface Reading {
  /** False from {@link formerFormsRefusedFrom}: they are refused. */
  formerFormsRead: boolean;
  /** Notes a form still read, for the operator to see at start. */
  warn(message: string): void;
}

/** One variable's value (trimmed, never empty) → the setting. */
export type Parse<T> = (raw: string, name: string, reading: Reading) => T;

/** The release from which a form only warned about today is refused (the next but one). */
export const formerFormsRefusedFrom = '0.3.0';

export const text: Parse<string> = (raw) => raw;

export const directory: Parse<string> = (raw) => resolve(raw);

export const port: Parse<number> = (raw, name) => {
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0 || value > 65535) {
    throw new ConfigError(`${name} must be a port number from 0 to 65535, not "${raw}"`);
  }
  return value;
};

export function oneOf<T extends string>(choices: readonly T[]): Parse<T> {
  return (raw, name) => {
    if (!(choices as readonly string[]).includes(raw)) {
      throw new ConfigError(`${name} must be one of ${choices.join(', ')}, not "${raw}"`);
    }
    return raw as T;
  };
}

export const trueOrFalse: Parse<boolean> = (raw, name) => {
  const value = raw.toLowerCase();
  if (value !== 'true' && value !== 'false') {
    throw new ConfigError(`${name} must be true or false, not "${raw}"`);
  }
  return value === 'true';
};

export function byteCount(example: string): Parse<number> {
  return (raw, name) => {
    const value = Number(raw);
    if (!Number.isSafeInteger(value) || value <= 0) {
      throw new ConfigError(`${name} must be a positive number of bytes, such as ${example}, not "${raw}"`);
    }
    return value;
  };
}

export function count(example: string): Parse<number> {
  return (raw, name) => {
    const value = Number(raw);
    if (!/^\d+$/.test(raw) || !Number.isSafeInteger(value) || value <= 0) {
      throw new ConfigError(
        `${name} must be a whole number greater than 0, such as ${example}, not "${raw}"`,
      );
    }
    return value;
  };
}

const unitMs = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `500ms`, `5s`, `15m`, `1h`, `1d` (and `0`, the same in every unit) → milliseconds. */
export function durationMs(raw: string): number | undefined {
  if (raw === '0') return 0;
  const match = /^(\d+)(ms|s|m|h|d)$/.exec(raw);
  if (!match) return undefined;
  const ms = Number(match[1]) * unitMs[match[2] as keyof typeof unitMs];
  return Number.isSafeInteger(ms) ? ms : undefined;
}

interface DurationRule {
  /** What the service counts in: a value not whole in it is refused. */
  in: 'ms' | 's';
  /** Shortest allowed, as a duration; `1ms` or `1s` by default (nothing waits for no time). */
  atLeast?: string;
  atMost?: string;
  /** Why the bounds, appended to the message that refuses a value past one. */
  why?: string;
}

/**
 * Every duration setting reads one form: a whole number and its unit. A bare number, once read as
 * seconds, is still read so with a warning until {@link formerFormsRefusedFrom}.
 */
export function duration(rule: DurationRule): Parse<number> {
  const atLeast = rule.atLeast ?? `1${rule.in}`;
  return (raw, name, reading) => {
    let given = raw;
    if (rule.in === 's' && /^\d+$/.test(raw) && raw !== '0' && reading.formerFormsRead) {
      given = `${raw}s`;
      reading.warn(
        `${name}=${raw} is read as ${given}: write ${name}=${given}, a duration without its unit is refused from svc ${formerFormsRefusedFrom}`,
      );
    }
    const ms = durationMs(given);
    if (ms === undefined) {
      throw new ConfigError(
        `${name} must be a duration: a whole number and its unit (ms, s, m, h or d), such as 500ms, 5s, 15m or 1h, not "${raw}"`,
      );
    }
    const why = rule.why ? `: ${rule.why}` : '';
    if (ms < (durationMs(atLeast) ?? 0)) {
      throw new ConfigError(`${name} must be at least ${atLeast}, not "${raw}"${why}`);
    }
    if (rule.atMost !== undefined && ms > (durationMs(rule.atMost) ?? 0)) {
      throw new ConfigError(`${name} must be at most ${rule.atMost}, not "${raw}"${why}`);
    }
    const perUnit = unitMs[rule.in];
    if (ms % perUnit !== 0) {
      throw new ConfigError(`${name} must be a whole number of seconds, such as 2s, not "${raw}"`);
    }
    return ms / perUnit;
  };
}

export function httpUrl(raw: string, name: string): string {
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be an absolute URL such as https://svc.example.com, not "${raw}"`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new ConfigError(`${name} must be an http or https URL, not "${raw}"`);
  }
  if (parsed.search || parsed.hash) throw new ConfigError(`${name} must not have a query or fragment`);
  return parsed.href.replace(/\/$/, '');
}

export const postgresUrl: Parse<string> = (raw, name) => {
  if (!/^postgres(ql)?:\/\//.test(raw)) {
    throw new ConfigError(`${name} must be a postgres:// or postgresql:// connection string`);
  }
  return raw;
};

/** Comma-separated emails, lower-cased; one that is no email is a mistake to stop at, not to skip. */
export const emailList: Parse<ReadonlySet<string>> = (raw, name) => {
  const emails = raw
    .split(',')
    .map((email) => email.trim().toLowerCase())
    .filter((email) => email !== '');
  const wrong = emails.find((email) => !/^[^\s@,]+@[^\s@,]+\.[^\s@,]+$/.test(email));
  if (wrong !== undefined) {
    throw new ConfigError(
      `${name} must be emails separated by commas, such as root@example.com,ops@example.com; "${wrong}" is not an email`,
    );
  }
  return new Set(emails);
};

/**
 * Comma-separated web origins: scheme, host and port (`https://app.example.com`,
 * `http://localhost:5173`), kept as a browser writes them in `Origin`. A path, a wildcard or
 * anything else no browser would send is a mistake to stop at: it would never match.
 */
export const originList: Parse<ReadonlySet<string>> = (raw, name) => {
  const entries = raw
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  const origins = new Set<string>();
  for (const entry of entries) {
    let origin: string | undefined;
    try {
      // URL parsing drops tabs and newlines silently; an origin never holds one.
      if (/\p{Cc}/u.test(entry)) throw new Error('control character');
      const parsed = new URL(entry);
      const bare = !parsed.username && !parsed.password && !parsed.search && !parsed.hash;
      if (['http:', 'https:'].includes(parsed.protocol) && bare && parsed.pathname === '/') {
        // As browsers write it: host lower-cased (IDNs in punycode), no default port.
        origin = parsed.origin;
      }
    } catch {}
    if (!origin) {
      throw new ConfigError(
        `${name} must be web origins separated by commas, such as https://app.example.com,http://localhost:5173 (scheme, host and port, no path); ${JSON.stringify(entry)} is not one`,
      );
    }
    origins.add(origin);
  }
  return origins;
};

export const brokerUrl: Parse<string> = (raw, name) => {
  let parsed: URL | undefined;
  try {
    parsed = new URL(raw);
  } catch {}
  if (!parsed || !['mqtt:', 'mqtts:'].includes(parsed.protocol) || !parsed.hostname) {
    throw new ConfigError(
      `${name} must be an mqtt:// or mqtts:// URL such as mqtt://127.0.0.1:1883, not "${raw}"`,
    );
  }
  if (parsed.username || parsed.password) {
    throw new ConfigError(
      `${name} must not hold a user name or password: set MQTT_USERNAME and MQTT_PASSWORD`,
    );
  }
  return raw;
};

export const redisUrl: Parse<string> = (raw, name) => {
  if (!/^rediss?:\/\/./.test(raw)) {
    throw new ConfigError(
      `${name} must be a redis:// or rediss:// URL such as redis://127.0.0.1:6379, not "${raw}"`,
    );
  }
  return raw;
};

/** A PEM file, read now, so that a wrong path stops start-up naming the setting. */
export const pemFile: Parse<Buffer> = (path, name) => {
  let content: Buffer;
  try {
    content = readFileSync(path);
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new ConfigError(
      `${name} names ${path}, which cannot be read (${reason}): set ${name} to a PEM file this user may read`,
    );
  }
  if (!content.includes('-----BEGIN ')) {
    throw new ConfigError(
      `${name} names ${path}, which holds no PEM block (-----BEGIN …): set ${name} to a PEM file`,
    );
  }
  return content;
};

/** Part of an MQTT client id: no `/`, `+`, `#` or spaces, and short enough to read in a log. */
export const replicaName: Parse<string> = (raw, name) => {
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(raw)) {
    throw new ConfigError(
      `${name} must be 1 to 64 letters, digits, '.', '_' or '-' (a name kept across restarts, such as svc-0), not "${raw}"`,
    );
  }
  return raw;
};

/** S3's rule for bucket names (MinIO's is the same): what else is set is a typo. */
export const bucketName: Parse<string> = (raw, name) => {
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(raw)) {
    throw new ConfigError(
      `${name} must be a bucket name (3 to 63 lower-case letters, digits, '.' or '-'), such as svc-packages, not "${raw}"`,
    );
  }
  return raw;
};

export const s3Endpoint: Parse<string> = (raw, name) => {
  let parsed: URL | undefined;
  try {
    parsed = new URL(raw);
  } catch {}
  if (!parsed || !['http:', 'https:'].includes(parsed.protocol) || !parsed.hostname) {
    throw new ConfigError(
      `${name} must be the http:// or https:// URL of an S3-compatible server, such as http://127.0.0.1:9000, not "${raw}"`,
    );
  }
  if (parsed.username || parsed.password || parsed.search || parsed.hash) {
    throw new ConfigError(
      `${name} must hold no user name, password or query: credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY`,
    );
  }
  return parsed.href.replace(/\/$/, '');
};

/**
 * 32 random bytes in base64, as `openssl rand -base64 32` writes them. The message never repeats
 * the value: it is a secret, and may be one pasted into the wrong variable.
 */
export const encryptionKey: Parse<Buffer> = (raw, name) => {
  const bytes = /^[A-Za-z0-9+/]+={0,2}$/.test(raw) ? Buffer.from(raw, 'base64') : undefined;
  if (bytes?.length !== 32) {
    const what = bytes ? `${bytes.length} bytes` : 'not base64';
    throw new ConfigError(
      `${name} must be 32 random bytes in base64, made with openssl rand -base64 32 (the value given is ${what})`,
    );
  }
  return bytes;
};
