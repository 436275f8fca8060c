/**
 * Telemetry is the bulk of what cars send, so it is written in batches: rows wait in memory until
 * there are `maxRows` of them or the oldest has waited `maxDelayMs`, and whatever waits is written
 * on stop. Batches are written one after another, in order, and the next fills while one is
 * written; a batch that fills before the one ahead of it is written holds the next message back,
 * which holds the broker back rather than letting memory grow.
 *
 * While the store is unavailable (a restart, a failover) a batch that could not be written is kept
 * and tried again after a pause, and new rows wait behind it, up to `maxWaitingRows`: beyond that
 * the oldest go, counted as dropped (`store_unavailable`), since a car's newest fixes say most. A
 * batch the store refuses for its content is dropped and counted (`handler_failed`).
 */
import { redactDeviceId } from '@svc/sdk';
import { saveTelemetry, type TelemetryRow } from '../cars/car-report-repository.ts';
import type { Logger } from '../logger.ts';
import type { Db } from '../store/db.ts';
import { storeUnavailableReason } from '../store/unavailable.ts';
import type { BridgeMetrics } from './bridge-metrics.ts';
import { storeRetryMs } from './store-outage.ts';

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
  metrics: BridgeMetrics;
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

  /** Stored or dropped (counted either way), or kept for another attempt: the store's reason. */
  async function write(rows: TelemetryRow[]): Promise<string | undefined> {
    try {
      const saving = saveTelemetry(db, rows);
      inFlight = saving.catch(() => undefined);
      const stored = await saving;
      metrics.counted('telemetry', 'stored', stored.length);
      const kept = new Set(stored);
      const unknown = rows.filter((row) => !kept.has(row.device_id));
      if (unknown.length > 0) {
        metrics.dropped('telemetry', 'unknown_car', unknown.length);
        for (const deviceId of new Set(unknown.map((row) => row.device_id))) {
          logger.warn('mqtt: telemetry of a car not provisioned dropped', {
            device: redactDeviceId(deviceId),
            reason: 'unknown_car',
          });
        }
      }
      return undefined;
    } catch (error) {
      const unavailable = storeUnavailableReason(error);
      if (unavailable !== undefined) return unavailable;
      metrics.dropped('telemetry', 'handler_failed', rows.length);
      logger.error('mqtt: a telemetry batch could not be stored', {
        rows: rows.length,
        error: error instanceof Error ? error.message : String(error),
      });
      return undefined;
    }
  }

  /** Drops the oldest rows beyond the bound; only an outage lets them pile up that far. */
  function keepWithinBound(): void {
    const over = waiting.length - maxWaitingRows;
    if (over <= 0) return;
    waiting.splice(0, over);
    metrics.dropped('telemetry', 'store_unavailable', over);
    logger.warn('mqtt: telemetry dropped: the store is unavailable and too many rows wait', {
      reason: 'store_unavailable',
      rows: over,
    });
  }

  /** Writes what waits, a batch at a time; on `final` (stop) an outage drops what is left. */
  async function writeWaiting(final: boolean): Promise<void> {
    while (waiting.length > 0) {
      const rows = waiting.splice(0, options.maxRows);
      const unavailable = await write(rows);
      if (unavailable === undefined) continue;
      waiting = [...rows, ...waiting];
      if (final) {
        metrics.dropped('telemetry', 'store_unavailable', waiting.length);
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
