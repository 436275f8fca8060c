/**
 * `svc_webhook_attempts_total{result}` and `svc_webhook_endpoints_disabled_total`: what webhook
 * deliveries come to, on the service's registry, for an operator watching receivers fail.
 */
import { Counter, type Registry } from 'prom-client';
import type { AttemptResult } from './webhook-sender.ts';

export interface WebhookMetrics {
  attempted(result: AttemptResult): void;
  disabled(): void;
}

export function createWebhookMetrics(registry: Registry): WebhookMetrics {
  const attempts = new Counter({
    name: 'svc_webhook_attempts_total',
    help: 'Webhook delivery attempts, by result: delivered (a 2xx answer), status (another answer), or why none came (timeout, address_refused, connection_failed, tls_failed, redirect, …).',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  const disabled = new Counter({
    name: 'svc_webhook_endpoints_disabled_total',
    help: 'Webhook endpoints disabled after every attempt failed for SVC_WEBHOOK_DISABLE_AFTER.',
    registers: [registry],
  });
  return {
    attempted(result) {
      attempts.inc({ result: result.outcome === 'delivered' ? 'delivered' : (result.error ?? 'status') });
    },
    disabled() {
      disabled.inc();
    },
  };
}
