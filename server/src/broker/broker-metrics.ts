/** The embedded broker's Prometheus metrics, on the service's registry (`/metrics`). */
import { Counter, type Registry } from 'prom-client';
import type { QueueLimit } from './broker-sessions.ts';
import type { PacketRefusal } from './packet-size-guard.ts';

/** Why the broker turned a connection away: a bounded set, so each is a metric label. */
export type ConnectionRefusal =
  | PacketRefusal
  | 'credential'
  | 'client_id'
  | 'store_unavailable'
  /** A TLS handshake that failed: a client that does not trust the certificate, or speaks plain MQTT. */
  | 'tls_handshake';

export interface BrokerMetrics {
  refused(reason: ConnectionRefusal): void;
  /** A QoS 1 message not queued for a client whose queue was at its bound. */
  queueDropped(limit: QueueLimit): void;
}

export function createBrokerMetrics(registry: Registry): BrokerMetrics {
  const refusals = new Counter({
    name: 'svc_mqtt_connections_refused_total',
    help: 'Connections the embedded broker refused or closed, by reason (credential, client_id, store_unavailable, packet_too_large, malformed_packet, tls_handshake).',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  const queueDrops = new Counter({
    name: 'svc_mqtt_queue_dropped_total',
    help: 'QoS 1 messages the embedded broker did not queue for a client whose queue was at its bound, by the bound reached (messages, bytes): a client away never gets them, a connected one once, never again.',
    labelNames: ['limit'] as const,
    registers: [registry],
  });
  return {
    refused(reason) {
      refusals.inc({ reason });
    },
    queueDropped(limit) {
      queueDrops.inc({ limit });
    },
  };
}
