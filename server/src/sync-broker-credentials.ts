/**
 * `npm run sync-broker-credentials`: writes into the key-value store (Redis, or the embedded
 * table) and into Mosquitto's dynamic security every car's and connector's credential that SQL
 * holds and they lack or hold otherwise, and removes those of cars no longer provisioned. The
 * service does the same on every start; this is for a Redis or a Mosquitto replaced while it runs.
 */

import { BrokerSetupError } from './broker/broker.ts';
import type { BrokerAccounts } from './broker/broker-accounts.ts';
import { createRedisCredentialStore, createSqlCredentialStore } from './broker/credentials.ts';
import { createMosquittoBroker } from './broker/mosquitto-dynsec.ts';
import { syncBrokerCredentials } from './cars/broker-credential-sync.ts';
import { UnavailableError } from './errors.ts';
import { createLogger } from './logger.ts';
import { loadConfigOrRefuse, openCommandStore, refuse } from './operator-command.ts';
import { KeyEncryptionError, loadKeyRing } from './store/key-encryption.ts';
import { storeUnavailableReason } from './store/unavailable.ts';

/** The embedded broker keeps no accounts of its own: it reads the key-value store at each sign-in. */
const embeddedBroker: BrokerAccounts = {
  async put() {},
  async remove() {},
  async list() {
    return undefined;
  },
};

async function sync(): Promise<void> {
  const config = loadConfigOrRefuse();
  const logger = createLogger({ level: config.logLevel });
  const store = await openCommandStore(config);
  let keyRing: ReturnType<typeof loadKeyRing>;
  try {
    keyRing = loadKeyRing(config);
  } catch (error) {
    await store.close();
    if (error instanceof KeyEncryptionError) refuse(error.message);
    throw error;
  }
  const credentials = config.redisUrl
    ? createRedisCredentialStore(config.redisUrl, logger)
    : createSqlCredentialStore(store.db);
  const mosquitto = config.mqttUrl
    ? createMosquittoBroker({
        url: config.mqttUrl,
        username: config.mqttUsername ?? '',
        password: config.mqttPassword ?? '',
        logger,
      })
    : undefined;
  try {
    await mosquitto?.start();
    const report = await syncBrokerCredentials({
      db: store.db,
      clock: () => new Date(),
      credentials,
      broker: mosquitto?.accounts ?? embeddedBroker,
      keyRing,
      logger,
    });
    process.stdout.write(
      `svc: broker credentials synced from the database: key-value store ${report.keyValueWritten} written, ${report.keyValueRemoved} removed; ${mosquitto ? `broker ${report.brokerWritten} written, ${report.brokerRemoved} removed` : 'the embedded broker reads the key-value store'}${report.withoutSecret.length > 0 ? `; ${report.withoutSecret.length} issued before secrets were kept cannot be given to the broker: rotate them` : ''}.\n`,
    );
  } catch (error) {
    if (error instanceof KeyEncryptionError || error instanceof BrokerSetupError) refuse(error.message);
    if (error instanceof UnavailableError) {
      refuse(
        `${config.redisUrl ? 'Redis at REDIS_URL' : 'the database'} did not answer: check that it runs, then run this again`,
      );
    }
    const reason = storeUnavailableReason(error);
    if (reason)
      refuse(
        `the database did not answer (${reason}): check that Postgres runs at DATABASE_URL, then run this again`,
      );
    throw error;
  } finally {
    await mosquitto?.stop();
    await credentials.close();
    await store.close();
  }
}

await sync();
