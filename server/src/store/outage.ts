/**
 * How the MQTT bridge waits out a store outage (a Postgres restart, a failover, a cut network):
 * work that fails because the store cannot be reached (unavailable.ts) is tried again after a
 * pause instead of being dropped, until it succeeds, fails for another reason (a message the
 * store refuses for its content: the caller drops and counts it), or the bridge stops. One
 * warning when an outage begins and one line when it ends, however many messages wait meanwhile.
 * The telemetry batch (cars/telemetry-batch.ts) pauses as long between its attempts.
 */
import type { Logger } from '../logger.ts';
import { storeUnavailableReason } from './unavailable.ts';

/** Long enough not to hammer a store that is starting, short enough to notice it is back. */
export const storeRetryMs = 1000;

/** The bridge stopped while the store was still unavailable: the work was not done. */
export class StoreOutageError extends Error {
  readonly reason: string;
  constructor(reason: string, options?: ErrorOptions) {
    super(`the store is unavailable: ${reason}`, options);
    this.reason = reason;
  }
}

export interface StoreOutage {
  /** `work`'s result once it succeeds; its error when it fails for another reason; StoreOutageError when stopped. */
  persist<T>(work: () => Promise<T>): Promise<T>;
  /** Whether the last attempt found the store unavailable. */
  readonly ongoing: boolean;
  /** Ends every pause at once: work failing for an outage from now on gives up. */
  stop(): void;
}

export function createStoreOutage(deps: { logger: Logger; retryMs?: number }): StoreOutage {
  const { logger } = deps;
  const retryMs = deps.retryMs ?? storeRetryMs;
  let ongoing = false;
  let stopped = false;
  const sleepers = new Set<() => void>();

  function pause(): Promise<void> {
    return new Promise((resolve) => {
      if (stopped) return resolve();
      const wake = () => {
        clearTimeout(timer);
        sleepers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, retryMs);
      sleepers.add(wake);
    });
  }

  return {
    async persist(work) {
      for (;;) {
        try {
          const result = await work();
          if (ongoing) {
            ongoing = false;
            logger.info('mqtt: the store answers again; waiting messages are being stored');
          }
          return result;
        } catch (error) {
          const reason = storeUnavailableReason(error);
          if (reason === undefined) throw error;
          if (!ongoing) {
            ongoing = true;
            logger.warn('mqtt: the store is unavailable; messages wait and are tried again', {
              reason,
              retry_ms: retryMs,
            });
          }
          if (stopped) throw new StoreOutageError(reason, { cause: error });
          await pause();
        }
      }
    },
    get ongoing() {
      return ongoing;
    },
    stop() {
      stopped = true;
      for (const wake of [...sleepers]) wake();
    },
  };
}
