/**
 * The service's periodic work, each task declared once with its period; the scheduler runs them
 * from the service's start to its stop, none overlapping itself.
 */
import type { Scheduler } from './scheduler.ts';
import type { Services } from './services.ts';

/** How often idempotency keys past their 24 hours are deleted. */
const idempotencySweepMs = 60 * 60 * 1000;

/** How often a replica looks at every released app's cars for updates a wake-up missed. */
const appUpdateSweepMs = 30 * 1000;

/** How often a replica looks for webhook deliveries a wake-up missed. */
const webhookSweepMs = 30 * 1000;

/** How often webhook events past the log's 30 days are deleted. */
const webhookLogSweepMs = 60 * 60 * 1000;

/** How often a replica looks whether the signing keys are due to rotate, and deletes spent ones. */
const signingKeyCheckMs = 60 * 1000;

export function schedulePeriodicWork(
  scheduler: Scheduler,
  services: Pick<
    Services,
    | 'uploads'
    | 'idempotency'
    | 'signingKeys'
    | 'commandOutbox'
    | 'appUpdates'
    | 'webhookDeliverer'
    | 'webhooks'
  >,
  options: {
    uploadLeaseSeconds: number;
    commandSweepSeconds: number;
    /** In milliseconds (tests); by default a minute. */
    signingKeyCheckMs?: number;
  },
): void {
  // Uploads whose receivers died (a crash, a kill) are let go, and their partial files deleted,
  // whenever a lease could have lapsed since the last look (start-up looks once itself, first).
  scheduler.scheduleTask({
    id: 'upload-sweep',
    periodMs: options.uploadLeaseSeconds * 1000,
    fn: () => services.uploads.sweep(),
  });
  // Idempotency keys past their 24 hours are taken as new already; the sweep only frees the room.
  scheduler.scheduleTask({
    id: 'idempotency-key-sweep',
    periodMs: idempotencySweepMs,
    runAtStart: true,
    fn: () => services.idempotency.sweep(),
  });
  // Commands not final by their expiry are expired, and what a wake-up missed (a replica that made
  // a command and died before its outbox woke) is published; replicas claim their rows.
  scheduler.scheduleTask({
    id: 'command-sweep',
    periodMs: options.commandSweepSeconds * 1000,
    fn: () => services.commandOutbox.sweep(),
  });
  // Cars an app update missed (a move made on another replica, a status that came late) are
  // moved; the updater's own wake-ups do the rest at once.
  scheduler.scheduleTask({
    id: 'app-update-sweep',
    periodMs: appUpdateSweepMs,
    fn: () => services.appUpdates.sweep(),
  });
  // Deliveries a wake-up missed (written on a replica whose NOTIFY was lost) go out; the
  // deliverer's own timer brings each retry on time.
  scheduler.scheduleTask({
    id: 'webhook-delivery-sweep',
    periodMs: webhookSweepMs,
    fn: async () => services.webhookDeliverer.sweep(),
  });
  // The delivery log keeps 30 days; older events go with their deliveries and attempts.
  scheduler.scheduleTask({
    id: 'webhook-log-sweep',
    periodMs: webhookLogSweepMs,
    runAtStart: true,
    fn: () => services.webhooks.forgetOldEvents(),
  });
  // Each replica looks; the store's lock makes one rotation of their looking at once.
  scheduler.scheduleTask({
    id: 'signing-key-check',
    periodMs: options.signingKeyCheckMs ?? signingKeyCheckMs,
    fn: async () => {
      await services.signingKeys.rotateIfDue();
      await services.signingKeys.deleteExpiredKeys();
    },
  });
}
