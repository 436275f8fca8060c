/**
 * Brings the key-value store and the broker in line with the broker credentials in SQL: what is
 * missing or different is written, and the entries of cars and connectors no longer provisioned
 * are removed. Run on every start and by `npm run sync-broker-credentials`; after a restore from
 * a backup it is what lets every car sign in again. Idempotent, and replicas take turns (a
 * Postgres advisory lock), so the later one finds nothing to do.
 */
import type { Brand } from '@svc/sdk';
import { validateDeviceId } from '@svc/sdk';
import type { BrokerAccount, BrokerAccounts } from '../broker/broker-accounts.ts';
import {
  adoptBrokerCredential,
  type BrokerCredentialRow,
  deleteBrokerCredential,
  findBrokerCredential,
  listBrokerCredentials,
  secretContext,
  withCredentialSyncLock,
} from '../broker/broker-credential-repository.ts';
import type { CredentialStore } from '../broker/credentials.ts';
import type { Clock } from '../clock.ts';
import type { Logger } from '../logger.ts';
import type { Db } from '../store/db.ts';
import type { KeyRing } from '../store/key-encryption.ts';
import { allDeviceIds, listConnectors } from './car-repository.ts';
import { connectorUsername } from './car-service.ts';

export function accountOf(row: Pick<BrokerCredentialRow, 'username' | 'role' | 'brand'>): BrokerAccount {
  if (row.role === 'car') {
    const { brand, nativeId } = validateDeviceId(row.username);
    return { username: row.username, role: 'car', brand, nativeId };
  }
  return { username: row.username, role: 'connector', brand: row.brand as Brand };
}

export interface SyncReport {
  /** Key-value entries written (missing or different) and removed (no longer provisioned). */
  keyValueWritten: number;
  keyValueRemoved: number;
  /** Broker accounts written and removed; zero for the embedded broker (it reads the key-value store). */
  brokerWritten: number;
  brokerRemoved: number;
  /** Credentials issued before secrets were kept in SQL: the broker cannot be given them. */
  withoutSecret: string[];
}

/** Every provisioned car's and connector's user name. */
async function provisionedUsernames(db: Db): Promise<Set<string>> {
  const names = new Set<string>();
  for (const deviceId of await allDeviceIds(db)) names.add(deviceId);
  for (const connector of await listConnectors(db))
    names.add(connectorUsername(connector.brand, connector.name));
  return names;
}

export async function syncBrokerCredentials(deps: {
  db: Db;
  clock: Clock;
  credentials: CredentialStore;
  broker: BrokerAccounts;
  keyRing: KeyRing;
  logger: Logger;
}): Promise<SyncReport> {
  const { db, clock, credentials, broker, keyRing, logger } = deps;
  const report: SyncReport = {
    keyValueWritten: 0,
    keyValueRemoved: 0,
    brokerWritten: 0,
    brokerRemoved: 0,
    withoutSecret: [],
  };
  await withCredentialSyncLock(db, async (sql) => {
    // Credentials first, then cars: a car's row is written before its credential's, so every
    // credential read here belongs to a car (or connector) the second read finds, unless it is gone.
    const rows = new Map((await listBrokerCredentials(sql)).map((row) => [row.username, row]));
    // A wrong key-encryption key opens nothing, yet would pass unnoticed while nothing needs
    // writing: one secret is opened first, so that it stops the sync in one line naming the key.
    const sealed = [...rows.values()].find((row) => row.secret);
    if (sealed?.secret) keyRing.open(sealed.secret, secretContext(sealed.username));
    const provisioned = await provisionedUsernames(sql);
    for (const username of [...rows.keys()]) {
      if (provisioned.has(username)) continue;
      // Left by a decommission cut short.
      await deleteBrokerCredential(sql, username);
      rows.delete(username);
    }
    // A car provisioned before credentials were kept in SQL: its hash comes from the key-value store.
    for (const username of provisioned) {
      if (rows.has(username)) continue;
      const held = await credentials.get(username);
      if (!held) continue;
      const row = { username, role: held.role, brand: held.brand, secretSha256: held.secretSha256 };
      await adoptBrokerCredential(sql, row, clock());
      rows.set(username, row);
    }
    /** Not provisioned, checked again just now: a car provisioned since the first read keeps its entries. */
    const gone = async (username: string) =>
      !rows.has(username) && !(await findBrokerCredential(sql, username));

    for (const row of rows.values()) {
      const held = await credentials.get(row.username);
      if (held?.secretSha256 === row.secretSha256 && held.role === row.role && held.brand === row.brand)
        continue;
      await credentials.put(row.username, {
        role: row.role,
        brand: row.brand as Brand,
        secretSha256: row.secretSha256,
      });
      report.keyValueWritten += 1;
    }
    for (const username of await credentials.usernames()) {
      if (!(await gone(username))) continue;
      await credentials.delete(username);
      report.keyValueRemoved += 1;
    }

    const listed = await broker.list();
    if (listed) {
      const held = new Map(listed.map((account) => [account.username, account]));
      for (const row of rows.values()) {
        if (held.get(row.username)?.secretSha256 === row.secretSha256) continue;
        if (!row.secret) {
          report.withoutSecret.push(row.username);
          continue;
        }
        await broker.put(accountOf(row), keyRing.open(row.secret, secretContext(row.username)));
        report.brokerWritten += 1;
      }
      for (const account of listed) {
        if (!(await gone(account.username))) continue;
        await broker.remove(account.username);
        report.brokerRemoved += 1;
      }
    }
  });
  const changed =
    report.keyValueWritten + report.keyValueRemoved + report.brokerWritten + report.brokerRemoved;
  if (changed > 0)
    logger.info('broker credentials synced from the database', {
      ...report,
      withoutSecret: report.withoutSecret.length,
    });
  if (report.withoutSecret.length > 0) {
    logger.warn(
      'the broker lacks credentials issued before secrets were kept in the database: rotate them (POST .../mqtt-credential/rotation) to let those cars sign in there',
      { usernames: report.withoutSecret.slice(0, 20), count: report.withoutSecret.length },
    );
  }
  return report;
}

/**
 * The service's own syncs: one at start, and one each time the key-value store reconnects (a
 * Redis that restarted holds nothing, and one away at start got nothing). A failure leaves what
 * the stores hold; the next reconnection or the operator's command tries again. One at a time: a
 * reconnection during a sync waits for it.
 */
export function keepBrokerCredentialsInSync(deps: Parameters<typeof syncBrokerCredentials>[0]) {
  let stopped = false;
  let syncing: Promise<void> = Promise.resolve();
  const sync = () => {
    syncing = syncing
      .then(() => syncBrokerCredentials(deps))
      .then(
        () => {},
        (error: unknown) =>
          deps.logger.error('broker credential sync failed', {
            error,
            hint: 'once the key-value store and the broker answer, run npm run sync-broker-credentials',
          }),
      );
    return syncing;
  };
  return {
    /** Resolves once the first sync has ended, well or not. */
    async start(): Promise<void> {
      await sync();
      deps.credentials.onReconnected?.(() => {
        if (!stopped) void sync();
      });
    },
    /** No sync starts after this; resolves once the one in progress has ended. */
    stop(): Promise<void> {
      stopped = true;
      return syncing;
    },
  };
}
