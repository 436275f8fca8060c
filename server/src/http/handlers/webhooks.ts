/** The account's webhook endpoints, their secrets, pings and delivery log. */
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';

export function webhookHandlers({ webhooks }: Services) {
  return {
    listWebhooks: async (_request, { principal }) => ({
      status: 200,
      body: { webhooks: await webhooks.list(principal) },
    }),

    createWebhook: async ({ body }, { principal }) => ({
      status: 201,
      body: await webhooks.create(principal, body),
    }),

    getWebhook: async ({ params }, { principal }) => ({
      status: 200,
      body: await webhooks.get(principal, params.webhook_id),
    }),

    updateWebhook: async ({ params, body }, { principal }) => ({
      status: 200,
      body: await webhooks.update(principal, params.webhook_id, body),
    }),

    deleteWebhook: async ({ params }, { principal }) => {
      await webhooks.remove(principal, params.webhook_id);
      return { status: 204 };
    },

    rotateWebhookSecret: async ({ params, body }, { principal }) => ({
      status: 201,
      body: await webhooks.rotateSecret(principal, params.webhook_id, body?.previous_secret_lasts_seconds),
    }),

    pingWebhook: async ({ params }, { principal }) => ({
      status: 202,
      body: await webhooks.ping(principal, params.webhook_id),
    }),

    listWebhookDeliveries: async ({ params, query }, { principal }) => ({
      status: 200,
      body: await webhooks.deliveries(principal, params.webhook_id, query),
    }),

    redeliverWebhookDelivery: async ({ params }, { principal }) => ({
      status: 202,
      body: await webhooks.redeliver(principal, params.webhook_id, params.delivery_id),
    }),
  } satisfies Partial<Handlers>;
}
