/**
 * What the bridge does with each message its connection hands over (connection.ts). The message
 * is read against the contract first (car-message.ts); one that fails is dropped, logged with the
 * redacted device id and counted by reason. A valid one goes to its topic suffix's handler
 * (intake/), which says what it did, and that is counted and logged the same way. A handler that
 * throws is caught, logged and counted too: nothing a car sends can stop the bridge.
 *
 * While the store is unavailable the message in hand is tried again after a pause
 * (store/outage.ts), which holds the stream back rather than dropping it.
 */
import { redactDeviceId } from '@svc/sdk';
import type { IPublishPacket } from 'mqtt';
import type { CarTopicPayloads, ServiceReceivedSuffix } from '../../../generated/mqtt.ts';
import type { Clock } from '../clock.ts';
import type { Logger } from '../logger.ts';
import { createStoreOutage, StoreOutageError } from '../store/outage.ts';
import type { BridgeMetrics } from './bridge-metrics.ts';
import { readCarMessage } from './car-message.ts';

/**
 * What a handler did with a valid message: kept it, kept nothing, found no such car, queued it, or
 * found it acknowledged a command the car was never sent.
 */
export type Handled =
  | 'stored'
  | 'ignored'
  | 'unknown_car'
  | 'queued'
  | 'unknown_command'
  | 'command_of_another_car';

export type Handler<S extends ServiceReceivedSuffix> = (
  deviceId: string,
  payload: CarTopicPayloads[S],
  /** When the service saw the car: now for a live message, undefined for a retained replay. */
  seenAt: Date | undefined,
) => Promise<Handled>;

/** One handler per topic suffix the service receives. */
export type Handlers = { [S in ServiceReceivedSuffix]: Handler<S> };

export function createDispatch(deps: {
  handlers: Handlers;
  clock: Clock;
  logger: Logger;
  metrics: BridgeMetrics;
}) {
  const { handlers, clock, logger, metrics } = deps;
  const outage = createStoreOutage({ logger });

  /** Whether to acknowledge the message: not when the bridge stopped before the store came back. */
  async function dispatch(packet: IPublishPacket): Promise<boolean> {
    const read = readCarMessage(packet.topic, packet.payload as Buffer, clock());
    if (!read.ok) {
      metrics.dropped(read.suffix ?? 'unknown', read.reason);
      logger.warn('mqtt: message dropped', {
        reason: read.reason,
        suffix: read.suffix,
        device: read.deviceId === undefined ? undefined : redactDeviceId(read.deviceId),
        detail: read.detail,
      });
      return true;
    }
    const { suffix, deviceId, payload } = read.message;
    // A retained message replayed on subscribing says what the car said some time ago, not that
    // it is there now (MQTT sets `retain` only on such replays).
    const seenAt = packet.retain ? undefined : clock();
    try {
      const handle = handlers[suffix] as Handler<typeof suffix>;
      const handled = await outage.persist(() => handle(deviceId, payload, seenAt));
      if (handled === 'unknown_car') {
        metrics.dropped(suffix, 'unknown_car');
        logger.warn('mqtt: message of a car not provisioned dropped', {
          reason: 'unknown_car',
          suffix,
          device: redactDeviceId(deviceId),
        });
      } else if (handled === 'unknown_command' || handled === 'command_of_another_car') {
        metrics.dropped(suffix, handled);
        logger.warn('mqtt: an acknowledgement of a command this car was not sent dropped', {
          reason: handled,
          suffix,
          device: redactDeviceId(deviceId),
        });
      } else if (handled !== 'queued') {
        metrics.counted(suffix, handled);
      }
    } catch (error) {
      if (error instanceof StoreOutageError) {
        metrics.dropped(suffix, 'store_unavailable');
        logger.warn('mqtt: a message was not stored: the bridge stopped during a store outage', {
          reason: 'store_unavailable',
          suffix,
          device: redactDeviceId(deviceId),
        });
        return false;
      }
      metrics.dropped(suffix, 'handler_failed');
      logger.error('mqtt: a message could not be handled', {
        reason: 'handler_failed',
        suffix,
        device: redactDeviceId(deviceId),
        error: error instanceof Error ? error.message : String(error),
      });
    }
    return true;
  }

  return {
    dispatch,
    /** Ends a wait for the store: the message in hand is given up, and not acknowledged. */
    stop: () => outage.stop(),
  };
}
