/**
 * Telemetry is the bulk of what cars send, so it is written in batches: rows wait in memory until
 * there are `maxRows` of them or the oldest has waited `maxDelayMs`, and whatever waits is written
 * on stop. A full batch is written before the next message is taken, which holds the broker back
 * rather than letting memory grow. Batches are written one after another, in order.
 */
import { redactDeviceId } from '@svc/sdk';
import { saveTelemetry, type TelemetryRow } from '../cars/car-report-repository.ts';
import type { Logger } from '../logger.ts';
import type { Db } from '../store/db.ts';
import type { BridgeMetrics } from './bridge-metrics.ts';

export interface TelemetryBatchOptions {
  maxRows: number;
  maxDelayMs: number;
}

export const defaultTelemetryBatch: TelemetryBatchOptions = { maxRows: 500, maxDelayMs: 200 };

export function createTelemetryBatch(deps: {
  db: Db;
  logger: Logger;
  metrics: BridgeMetrics;
  options: TelemetryBatchOptions;
}) {
  const { db, logger, metrics, options } = deps;
  let waiting: TelemetryRow[] = [];
  let timer: NodeJS.Timeout | undefined;
  let writing: Promise<void> = Promise.resolve();

  /** Never rejects: a batch the store refused is logged and counted, and the bridge goes on. */
  async function write(rows: TelemetryRow[]): Promise<void> {
    try {
      const stored = await saveTelemetry(db, rows);
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
    } catch (error) {
      metrics.dropped('telemetry', 'handler_failed', rows.length);
      logger.error('mqtt: a telemetry batch could not be stored', {
        rows: rows.length,
        error: error instanceof Error ? error.message : String(error),
      });
    }
  }

  function flush(): Promise<void> {
    clearTimeout(timer);
    timer = undefined;
    const rows = waiting;
    waiting = [];
    if (rows.length > 0) writing = writing.then(() => write(rows));
    return writing;
  }

  return {
    async add(row: TelemetryRow): Promise<void> {
      waiting.push(row);
      if (waiting.length >= options.maxRows) await flush();
      else timer ??= setTimeout(flush, options.maxDelayMs);
    },
    /** Writes what waits, and resolves once every batch so far is written (or counted as failed). */
    flush,
  };
}
