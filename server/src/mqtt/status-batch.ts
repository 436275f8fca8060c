/**
 * Status reports are written in batches, as telemetry is (telemetry-batch.ts): one statement per
 * batch instead of a transaction per report, which is what lets the bridge keep up with a fleet
 * (bench:ingest). A full batch is written before the next message is taken, which holds the broker
 * back rather than letting memory grow; batches are written one after another, so each car's
 * reports keep their order. A batch refused for what a report holds (a data exception, SQLSTATE
 * class 22, e.g. a NUL character Postgres will not keep in jsonb) is written again report by
 * report, so that one bad report does not take the others with it.
 */
import { redactDeviceId } from '@svc/sdk';
import { type QueuedStatusReport, saveStatusReports } from '../cars/car-report-repository.ts';
import type { Logger } from '../logger.ts';
import type { Db } from '../store/db.ts';
import type { BridgeMetrics } from './bridge-metrics.ts';
import type { TelemetryBatchOptions } from './telemetry-batch.ts';

export type StatusBatchOptions = TelemetryBatchOptions;

export const defaultStatusBatch: StatusBatchOptions = { maxRows: 500, maxDelayMs: 50 };

const isDataException = (error: unknown) => /^22/.test(String((error as { code?: unknown })?.code ?? ''));

export function createStatusBatch(deps: {
  db: Db;
  logger: Logger;
  metrics: BridgeMetrics;
  options: StatusBatchOptions;
}) {
  const { db, logger, metrics, options } = deps;
  let waiting: QueuedStatusReport[] = [];
  let timer: NodeJS.Timeout | undefined;
  let writing: Promise<void> = Promise.resolve();

  function counted(reports: QueuedStatusReport[], stored: string[]): void {
    metrics.counted('status', 'stored', stored.length);
    const kept = new Set(stored);
    const unknown = reports.filter((report) => !kept.has(report.deviceId));
    if (unknown.length === 0) return;
    metrics.dropped('status', 'unknown_car', unknown.length);
    for (const deviceId of new Set(unknown.map((report) => report.deviceId))) {
      logger.warn('mqtt: message of a car not provisioned dropped', {
        reason: 'unknown_car',
        suffix: 'status',
        device: redactDeviceId(deviceId),
      });
    }
  }

  function failed(reports: QueuedStatusReport[], error: unknown): void {
    metrics.dropped('status', 'handler_failed', reports.length);
    logger.error('mqtt: a message could not be handled', {
      reason: 'handler_failed',
      suffix: 'status',
      reports: reports.length,
      device: reports.length === 1 ? redactDeviceId(reports[0]?.deviceId ?? '') : undefined,
      error: error instanceof Error ? error.message : String(error),
    });
  }

  /** Never rejects: what the store refused is logged and counted, and the bridge goes on. */
  async function write(reports: QueuedStatusReport[]): Promise<void> {
    try {
      counted(reports, await saveStatusReports(db, reports));
    } catch (error) {
      if (reports.length === 1 || !isDataException(error)) {
        failed(reports, error);
        return;
      }
      for (const report of reports) await write([report]);
    }
  }

  function flush(): Promise<void> {
    clearTimeout(timer);
    timer = undefined;
    const reports = waiting;
    waiting = [];
    if (reports.length > 0) writing = writing.then(() => write(reports));
    return writing;
  }

  return {
    async add(report: QueuedStatusReport): Promise<void> {
      waiting.push(report);
      if (waiting.length >= options.maxRows) await flush();
      else timer ??= setTimeout(flush, options.maxDelayMs);
    },
    /** Writes what waits, and resolves once every batch so far is written (or counted as failed). */
    flush,
  };
}
