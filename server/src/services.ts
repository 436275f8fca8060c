/** The service layer, wired once per app from its store, config and clock. */
import { createAccountService } from './accounts/account-service.ts';
import { type AdminCode, createAdminCodeService } from './accounts/admin-codes.ts';
import { createPasswords, type Passwords } from './accounts/passwords.ts';
import { createAppUpdater } from './app-updates/app-updater.ts';
import { rolloutProgress } from './app-updates/rollout-progress.ts';
import { createTokenService } from './auth/token-service.ts';
import type { BrokerAccounts } from './broker/broker-accounts.ts';
import type { CredentialStore } from './broker/credentials.ts';
import { createCarReportService } from './cars/car-report-service.ts';
import { createCarService } from './cars/car-service.ts';
import { createOwnershipService } from './cars/ownership-service.ts';
import { createPairingService } from './cars/pairing-service.ts';
import type { Clock } from './clock.ts';
import { createCommandLifecycle } from './commands/command-lifecycle.ts';
import type { CommandMetrics } from './commands/command-metrics.ts';
import { createCommandOutbox } from './commands/command-outbox.ts';
import { createCommandService } from './commands/command-service.ts';
import type { Config } from './config.ts';
import { createIdempotencyService } from './idempotency/idempotency-service.ts';
import { createIdentityTokenService } from './identity/identity-tokens.ts';
import { createSigningKeyService } from './identity/signing-keys.ts';
import type { Logger } from './logger.ts';
import { createMiniAppService } from './mini-apps/mini-app-service.ts';
import { createRolloutService } from './mini-apps/rollout-service.ts';
import type { BridgeHealth } from './mqtt/bridge-health.ts';
import { createFailureLimit } from './sign-in/failure-limit.ts';
import { createSignInService } from './sign-in/sign-in-service.ts';
import { createKeyService } from './ssh-keys/key-service.ts';
import { type Db, openOwnConnection, storeOpened } from './store/db.ts';
import type { KeyRing } from './store/key-encryption.ts';
import { migrate } from './store/migrator.ts';
import { createStoreReadiness } from './store/readiness.ts';
import { createBucketPackageStore } from './uploads/bucket-package-store.ts';
import { createFilePackageStore } from './uploads/file-package-store.ts';
import { createUploadService } from './uploads/upload-service.ts';
import { createWebhookDeliverer } from './webhooks/webhook-deliverer.ts';
import { createWebhookEvents } from './webhooks/webhook-events.ts';
import type { WebhookMetrics } from './webhooks/webhook-metrics.ts';
import { createWebhookSender } from './webhooks/webhook-sender.ts';
import { createWebhookService } from './webhooks/webhook-service.ts';

export type Services = ReturnType<typeof createServices>;

export function createServices(deps: {
  db: Db;
  config: Config;
  clock: Clock;
  /** The service's base URL, as the request's Host names it when that is one of its own names. */
  audience: (requestHost?: string) => string;
  /** Password hashing; tests pass a cheaper scrypt cost. */
  passwords?: Passwords;
  /** Where broker credentials are kept (`mqtt:auth:{username}`). */
  credentials: CredentialStore;
  /** The broker's own record of who may connect. */
  broker: BrokerAccounts;
  logger: Logger;
  commandMetrics: CommandMetrics;
  webhookMetrics?: WebhookMetrics;
  /** Whether the MQTT bridge takes the cars' messages (for /readyz). */
  bridgeHealth: BridgeHealth;
  /** Seals what the store keeps secret (store/key-encryption.ts). */
  keyRing: KeyRing;
}) {
  const { db, config, clock, logger, commandMetrics } = deps;
  // Packages in DATA_DIR, or in the bucket every replica shares (S3_BUCKET).
  const packages = config.packageBucket
    ? createBucketPackageStore(config.packageBucket, { logger })
    : createFilePackageStore(config.dataDir);
  const tokens = createTokenService(db, config, clock);
  const failures = createFailureLimit(db, clock);
  const uploads = createUploadService({ db, config, clock, packages, baseUrl: () => deps.audience() });
  const signingKeys = createSigningKeyService({
    db,
    clock,
    rotationSeconds: config.signingKeyRotationSeconds,
    logger,
    keyRing: deps.keyRing,
  });
  // What cars say is written on a connection of its own, since each write paces every car's stream
  // (ADR 0035); on PGlite there is one connection for everything.
  const bridgeWriter =
    openOwnConnection(db, {
      acquireTimeoutMs: config.databaseAcquireTimeoutMs,
      statementTimeoutMs: config.databaseStatementTimeoutMs,
    }) ?? db;
  const webhookEvents = createWebhookEvents({ db, clock });
  const webhookDeliverer = createWebhookDeliverer({
    db,
    clock,
    logger,
    keyRing: deps.keyRing,
    events: webhookEvents,
    sender: createWebhookSender({
      timeoutMs: config.webhookTimeoutMs,
      maxResponseBytes: 64 * 1024,
      allowPrivate: config.webhookAllowPrivate,
    }),
    timeoutMs: config.webhookTimeoutMs,
    disableAfterSeconds: config.webhookDisableAfterSeconds,
    metrics: deps.webhookMetrics,
  });
  // Review and rollout moves tell the app's developer, the rollout with its progress.
  const releaseEvents = { webhookEvents, progressOf: rolloutProgress };
  const commandLifecycle = createCommandLifecycle({
    db,
    bridgeWriter,
    clock,
    metrics: commandMetrics,
    webhookEvents,
  });
  const storeReadiness = createStoreReadiness(db);
  const appUpdates = createAppUpdater({
    db,
    clock,
    logger,
    lifecycle: commandLifecycle,
    ratePerSecond: config.appUpdateRate,
  });
  const commandOutbox = createCommandOutbox({
    db,
    clock,
    logger,
    lifecycle: commandLifecycle,
    carOnline: appUpdates.carOnline,
  });
  const cars = createCarService({
    db,
    clock,
    webhookEvents,
    credentials: deps.credentials,
    broker: deps.broker,
    keyRing: deps.keyRing,
  });
  return {
    db,
    storeReadiness,
    packages,
    /** Where the bridge writes what cars say (status, presence, sightings, acknowledgements). */
    bridgeWriter,
    /** Lets go of what the services hold open; the store itself is its owner's to close. */
    async close(): Promise<void> {
      await appUpdates.stop();
      await webhookDeliverer.stop();
      await webhookEvents.stop();
      await storeReadiness.close();
      packages.close();
      if (bridgeWriter !== db) await bridgeWriter.destroy();
    },
    bridgeHealth: deps.bridgeHealth,
    /** Redis's own check when REDIS_URL is set; otherwise undefined (the SQL table: operations.ts). */
    keyValueReadiness: deps.credentials.ready?.bind(deps.credentials),
    config,
    tokens,
    failures,
    accounts: createAccountService(db, config, clock, deps.passwords ?? createPasswords()),
    adminCodes: createAdminCodeService(db, config, clock),
    keys: createKeyService(db, clock, () => tokens.forgetCached()),
    signIn: createSignInService({ db, clock, tokens, failures, audience: deps.audience }),
    uploads,
    cars,
    carReports: createCarReportService({ db, webhookEvents }),
    ownership: createOwnershipService({ db, clock, commands: commandLifecycle }),
    miniApps: createMiniAppService({
      ...releaseEvents,
      db,
      clock,
      uploads,
      onReleaseChanged: appUpdates.wake,
    }),
    rollouts: createRolloutService({ ...releaseEvents, db, clock, onReleaseChanged: appUpdates.wake }),
    appUpdates,
    idempotency: createIdempotencyService({ db, clock }),
    commandLifecycle,
    commandOutbox,
    commands: createCommandService({ db, clock, lifecycle: commandLifecycle, visibleCar: cars.visible }),
    pairing: createPairingService({ db, clock, commands: commandLifecycle }),
    signingKeys,
    webhooks: createWebhookService({
      db,
      clock,
      keyRing: deps.keyRing,
      events: webhookEvents,
      allowPrivate: config.webhookAllowPrivate,
    }),
    webhookEvents,
    webhookDeliverer,
    identityTokens: createIdentityTokenService({ db, clock, keys: signingKeys, issuer: deps.audience }),
  };
}

/**
 * Readies the store for the services before the service starts: its migrations, the signing keys,
 * and the admin codes to print. Start-up is no request: on Postgres it runs over a connection of
 * its own, without the requests' timeouts, since a migration may rightly take long.
 */
export async function prepareStore(
  db: Db,
  services: Pick<Services, 'signingKeys' | 'adminCodes'>,
  logger: Logger,
): Promise<AdminCode[]> {
  await storeOpened(db);
  const startup = openOwnConnection(db, {});
  try {
    await migrate(startup ?? db, { logger });
    await services.signingKeys.ensure();
    return await services.adminCodes.issue();
  } finally {
    await startup?.destroy();
  }
}
