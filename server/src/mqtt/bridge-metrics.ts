/** The bridge's Prometheus metrics, on the service's registry (`/metrics`). */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ServiceReceivedSuffix } from '../../../generated/mqtt.ts';
import type { DropReason } from './car-message.ts';

/** stored: written to the store; dropped: see the reason; ignored: valid, and nothing keeps it yet. */
export type MessageOutcome = 'stored' | 'dropped' | 'ignored';

export interface BridgeMetrics {
  counted(suffix: ServiceReceivedSuffix | 'unknown', outcome: MessageOutcome, count?: number): void;
  dropped(suffix: ServiceReceivedSuffix | 'unknown', reason: DropReason, count?: number): void;
}

export function createBridgeMetrics(
  registry: Registry,
  /** This replica's share of the connected cars, so that a sum over replicas is the fleet (connected-cars.ts). */
  connectedCars: () => Promise<number>,
): BridgeMetrics {
  const messages = new Counter({
    name: 'svc_mqtt_messages_total',
    help: 'MQTT messages from cars, by topic suffix and outcome (stored, dropped, ignored: valid and not kept).',
    labelNames: ['suffix', 'outcome'] as const,
    registers: [registry],
  });
  const drops = new Counter({
    name: 'svc_mqtt_dropped_total',
    help: 'MQTT messages from cars dropped, by reason (invalid_topic, not_json, invalid_payload, topic_mismatch, unknown_car, handler_failed, store_unavailable, too_large; unknown_command, command_of_another_car: a cmd/ack of a command the car was not sent).',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  new Gauge({
    name: 'svc_mqtt_connected_cars',
    help: "Cars connected, this replica's share: a sum over the replicas is the fleet's number. Embedded broker: the cars signed in to this replica's broker; Mosquitto: the cars whose presence says online, reported by one replica at a time (the others say 0).",
    registers: [registry],
    async collect() {
      // A store that cannot answer leaves the last value rather than failing the whole scrape.
      try {
        this.set(await connectedCars());
      } catch {}
    },
  });
  return {
    counted(suffix, outcome, count = 1) {
      messages.inc({ suffix, outcome }, count);
    },
    dropped(suffix, reason, count = 1) {
      messages.inc({ suffix, outcome: 'dropped' }, count);
      drops.inc({ reason }, count);
    },
  };
}
