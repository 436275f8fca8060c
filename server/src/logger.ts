/**
 * What the operator reads (DESIGN.md §13): pino, one JSON object per line on stderr, or pretty
 * lines when stderr is a terminal. Never given tokens, passwords, secrets or request bodies; a
 * device id anywhere in a line is written as redactDeviceId writes it, whoever logged it.
 */

import { Writable } from 'node:stream';
import { redactDeviceId } from '@svc/sdk';
import pino from 'pino';
import pretty from 'pino-pretty';
import { brands } from '../../generated/brands.ts';

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  /** Something the operator should know of that is not a bug here (the store unreachable). */
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
  /** The pino logger underneath, for the request log (http/request-log.ts). */
  readonly pino: pino.Logger;
}

export interface LoggerOptions {
  /** Where the lines go; by default stderr. */
  destination?: { write(line: string): void };
  /** Pretty lines for a person; by default when stderr is a terminal. */
  pretty?: boolean;
  level?: pino.LevelWithSilent;
}

/**
 * A device id as it may appear in a line: plain, or URL-encoded in a path or query, wherever it
 * starts. The native id is taken in its widest form (every brand's characters, any length), so
 * nothing slips past by brand or by being too long to be valid.
 */
const deviceIdInText = new RegExp(`(${brands.join('|')})(:|%3[Aa])([A-Za-z0-9._-]+)`, 'g');

/** The line with every device id in it redacted. */
export function redactDeviceIds(text: string): string {
  return text.replace(deviceIdInText, (_match, brand: string, _colon, nativeId: string) =>
    redactDeviceId(`${brand}:${nativeId}`),
  );
}

/**
 * Lines go to stderr a few KiB at a time, and at the latest a tenth of a second after they were
 * logged: one write a line was a system call for every request. At exit, what is left is written
 * before the process ends (pino's destination flushes it then).
 */
const lineBatchBytes = 4096;
const lineBatchMs = 100;

function stderrInBatches(): pino.DestinationStream & { flush(done?: (error?: Error) => void): void } {
  const stderr = pino.destination({ dest: 2, sync: false, minLength: lineBatchBytes });
  let waiting = false;
  setInterval(() => {
    if (!waiting) return;
    waiting = false;
    stderr.flush();
  }, lineBatchMs).unref();
  return {
    write(line: string) {
      waiting = true;
      stderr.write(line);
    },
    flush: (done) => stderr.flush(done),
  };
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const usePretty = options.pretty ?? (options.destination === undefined && process.stderr.isTTY === true);
  const output = options.destination ?? process.stderr;
  const destination = usePretty
    ? pretty({
        destination: new Writable({
          write(chunk, _encoding, done) {
            output.write(String(chunk));
            done();
          },
        }),
        sync: true,
        colorize: options.destination === undefined,
        messageKey: 'message',
      })
    : (options.destination ?? stderrInBatches());
  const logger = pino(
    {
      level: options.level ?? 'info',
      messageKey: 'message',
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      serializers: { error: pino.stdSerializers.err },
      hooks: { streamWrite: redactDeviceIds },
    },
    destination,
  );
  return wrap(logger);
}

function wrap(logger: pino.Logger): Logger {
  return {
    debug: (message, fields) => logger.debug(fields ?? {}, message),
    info: (message, fields) => logger.info(fields ?? {}, message),
    warn: (message, fields) => logger.warn(fields ?? {}, message),
    error: (message, fields) => logger.error(fields ?? {}, message),
    pino: logger,
  };
}

export const silentLogger: Logger = wrap(pino({ level: 'silent' }));
