/**
 * Telemetry is the bulk of what cars send, so it is written in batches: rows wait in memory until
 * there are `maxRows` of them or the oldest has waited `maxDelayMs`, and whatever waits is written
 * on stop. Batches are written one after another, in order, and the next fills while one is
 * written; a batch that fills before the one ahead of it is written holds the next message back,
 * which holds the broker back rather than letting memory grow.
 *
 * While the store is unavailable (a restart, a failover) a batch that could not be written is kept
 * and tried again after a pause, and new rows wait behind it, up to `maxWaitingRows`: beyond that
 * the oldest go, counted as dropped (`store_unavailable`), since a car's newest fixes say most.
 *
 * A batch is one statement, so a row the store refuses for its content (a time it cannot hold that
 * got past car-time.ts, a constraint) fails every car's rows with it. Such a batch is written again
 * in halves, and those halves in halves, down to the rows the store refuses, which alone are
 * dropped, logged and counted (`handler_failed`): one car's bad row never costs another car a fix,
 * and the store is asked twice per batch and refused row times the halvings at most. An outage met
 * on the way is an outage, not a refusal: what is not stored yet waits, as above.
 */
import { redactDeviceId } from '@svc/sdk';
import type { Logger } from '../logger.ts';
import type { Db } from '../store/db.ts';
import { storeRetryMs } from '../store/outage.ts';
import { storeUnavailableReason } from '../store/unavailable.ts';
import { saveTelemetry, type TelemetryRow } from './car-report-repository.ts';

export type { TelemetryRow } from './car-report-repository.ts';

/** What the batch counts of the rows it was given (the bridge's `telemetry` messages). */
export interface TelemetryBatchMetrics {
  stored(count: number): void;
  dropped(reason: 'unknown_car' | 'handler_failed' | 'store_unavailable', count?: number): void;
}

export interface TelemetryBatchOptions {
  maxRows: number;
  maxDelayMs: number;
  /** Rows kept while the store is unavailable; by default `waitingBatches` batches. */
  maxWaitingRows?: number;
}

export const defaultTelemetryBatch: TelemetryBatchOptions = { maxRows: 500, maxDelayMs: 200 };

/** A few seconds of a large fleet's fixes at the default batch: tens of megabytes at most. */
const waitingBatches = 20;

export function createTelemetryBatch(deps: {
  db: Db;
  logger: Logger;
  metrics: TelemetryBatchMetrics;
  options: TelemetryBatchOptions;
}) {
  const { db, logger, metrics, options } = deps;
  const maxWaitingRows = options.maxWaitingRows ?? options.maxRows * waitingBatches;
  let waiting: TelemetryRow[] = [];
  let timer: NodeJS.Timeout | undefined;
  /** Set while the store is unavailable: the pause before the next attempt. */
  let retry: NodeJS.Timeout | undefined;
  let writing: Promise<void> = Promise.resolve();
  /** The one batch being written now, if any: settles when the store answers. */
  let inFlight: Promise<unknown> = Promise.resolve();

  /** Counts what the store kept of `rows`, and drops (counting) the rows of cars not provisioned. */
  function stored(rows: TelemetryRow[], deviceIds: string[]): void {
    metrics.stored(deviceIds.length);
    const kept = new Set(deviceIds);
    const unknown = rows.filter((row) => !kept.has(row.device_id));
    if (unknown.length === 0) return;
    metrics.dropped('unknown_car', unknown.length);
    for (const deviceId of new Set(unknown.map((row) => row.device_id))) {
      logger.warn('mqtt: telemetry of a car not provisioned dropped', {
        device: redactDeviceId(deviceId),
        reason: 'unknown_car',
      });
    }
  }

  /**
   * Writes `rows`, halving on a refusal (see above). Undefined once every row is stored or dropped
   * (counted either way); during an outage, the store's reason and the rows not stored yet, in order.
   */
  async function write(
    rows: TelemetryRow[],
  ): Promise<{ unavailable: string; left: TelemetryRow[] } | undefined> {
    try {
      stored(rows, await saveTelemetry(db, rows));
      return undefined;
    } catch (error) {
      const unavailable = storeUnavailableReason(error);
      if (unavailable !== undefined) return { unavailable, left: rows };
      const [row] = rows;
      if (rows.length === 1 && row) {
        metrics.dropped('handler_failed');
        logger.error('mqtt: a telemetry fix the store refused dropped', {
          reason: 'handler_failed',
          device: redactDeviceId(row.device_id),
          error: error instanceof Error ? error.message : String(error),
        });
        return undefined;
      }
      const half = Math.ceil(rows.length / 2);
      const first = await write(rows.slice(0, half));
      if (first) return { unavailable: first.unavailable, left: [...first.left, ...rows.slice(half)] };
      return write(rows.slice(half));
    }
  }

  /** Drops the oldest rows beyond the bound; only an outage lets them pile up that far. */
  function keepWithinBound(): void {
    const over = waiting.length - maxWaitingRows;
    if (over <= 0) return;
    waiting.splice(0, over);
    metrics.dropped('store_unavailable', over);
    logger.warn('mqtt: telemetry dropped: the store is unavailable and too many rows wait', {
      reason: 'store_unavailable',
      rows: over,
    });
  }

  /** Writes what waits, a batch at a time; on `final` (stop) an outage drops what is left. */
  async function writeWaiting(final: boolean): Promise<void> {
    while (waiting.length > 0) {
      const rows = waiting.splice(0, options.maxRows);
      const attempt = write(rows);
      inFlight = attempt;
      const outage = await attempt;
      if (outage === undefined) continue;
      const { unavailable, left } = outage;
      waiting = [...left, ...waiting];
      if (final) {
        metrics.dropped('store_unavailable', waiting.length);
        logger.error('mqtt: telemetry not stored on stop: the store is unavailable', {
          reason: unavailable,
          rows: waiting.length,
        });
        waiting = [];
        return;
      }
      if (retry === undefined) {
        logger.warn('mqtt: telemetry waits: the store is unavailable', {
          reason: unavailable,
          rows: waiting.length,
          retry_ms: storeRetryMs,
        });
      }
      keepWithinBound();
      clearTimeout(retry);
      retry = setTimeout(retryNow, storeRetryMs);
      return;
    }
    if (retry !== undefined) {
      retry = undefined;
      logger.info('mqtt: telemetry is stored again');
    }
  }

  function retryNow(): void {
    void flush();
  }

  function flush(final = false): Promise<void> {
    clearTimeout(timer);
    timer = undefined;
    if (final) clearTimeout(retry);
    writing = writing.then(() => writeWaiting(final));
    return writing;
  }

  return {
    async add(row: TelemetryRow): Promise<void> {
      waiting.push(row);
      // During an outage the next attempt is already set: rows wait for it, within the bound.
      if (retry !== undefined) keepWithinBound();
      else if (waiting.length >= options.maxRows) {
        const ahead = inFlight;
        void flush();
        await ahead;
      } else timer ??= setTimeout(flush, options.maxDelayMs);
    },
    /** Writes what waits, and resolves once every batch so far is written (or counted as failed). */
    flush: () => flush(),
    /** The last flush, on stop: what the store cannot take now is counted as dropped. */
    close: () => flush(true),
  };
}

export type TelemetryBatch = ReturnType<typeof createTelemetryBatch>;
