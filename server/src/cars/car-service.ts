/**
 * Provisioning (admins only): a car and its broker credential, the credential's rotation, and
 * decommissioning; brand connectors likewise. The key-value store keeps the credential's hash
 * under `mqtt:auth:{username}`; the broker is told through `BrokerAccounts`. A step that fails
 * undoes the ones before it, so a car is never left half-provisioned.
 */
import { type Brand, isValidDeviceId } from '@svc/sdk';
import type { components } from '../../../generated/openapi.ts';
import type { Principal } from '../auth/principal.ts';
import type { BrokerAccount, BrokerAccounts } from '../broker/broker-accounts.ts';
import {
  deleteBrokerCredential,
  putBrokerCredential,
  secretContext,
} from '../broker/broker-credential-repository.ts';
import { type CredentialStore, hashBrokerSecret, newBrokerSecret } from '../broker/credentials.ts';
import type { Clock } from '../clock.ts';
import type { ParsedDeviceId } from '../device-id.ts';
import { ConflictError, NotFoundError } from '../errors.ts';
import { decodePageCursor, encodePageCursor } from '../page-cursor.ts';
import type { Db } from '../store/db.ts';
import type { KeyRing } from '../store/key-encryption.ts';
import type { WebhookEvents } from '../webhooks/webhook-events.ts';
import { endPresence, lockPresence } from './car-report-repository.ts';
import { presenceChanged } from './car-report-service.ts';
import {
  type CarPosition,
  type CarRow,
  type CarSummaryRow,
  type ConnectorRow,
  deleteCar,
  deleteConnector,
  findCar,
  findCarSummary,
  findConnector,
  insertCar,
  insertConnector,
  listCars,
  listConnectors,
} from './car-repository.ts';
import { maySeeCar, visibleCar } from './car-visibility.ts';

export type Car = components['schemas']['Car'];
export type CarSummary = components['schemas']['CarSummary'];
export type Connector = components['schemas']['Connector'];
export type MqttCredential = components['schemas']['MqttCredential'];

export function toApiCar(row: CarRow): Car {
  return {
    device_id: row.device_id,
    brand: row.brand as Brand,
    owner_id: row.owner_id,
    paired_at: row.paired_at?.toISOString() ?? null,
    provisioned_at: row.provisioned_at.toISOString(),
  };
}

/** A car with what lists show of it: online, last seen, the apps of its last report. */
export function toApiCarSummary(row: CarSummaryRow): CarSummary {
  return {
    ...toApiCar(row),
    online: row.online ?? false,
    last_seen: row.last_seen?.toISOString() ?? null,
    installed_apps: row.installed_apps ?? [],
    reported_at: row.reported_at?.toISOString() ?? null,
  };
}

export function connectorUsername(brand: string, name: string): string {
  return `connector:${brand}:${name}`;
}

export function toApiConnector(row: ConnectorRow): Connector {
  return {
    brand: row.brand as Brand,
    name: row.name,
    username: connectorUsername(row.brand, row.name),
    created_at: row.created_at.toISOString(),
  };
}

function carAccount({ deviceId, brand, nativeId }: ParsedDeviceId): BrokerAccount {
  return { username: deviceId, role: 'car', brand, nativeId };
}

function connectorAccount(row: Pick<ConnectorRow, 'brand' | 'name'>): BrokerAccount {
  return { username: connectorUsername(row.brand, row.name), role: 'connector', brand: row.brand as Brand };
}

function carNotFound(deviceId: string): NotFoundError {
  return new NotFoundError('car_not_found', `No car ${deviceId} is provisioned.`);
}

/** Where the next page starts: after the last car of this one. */
const cursorOf = (row: CarRow) => encodePageCursor(row.provisioned_at, row.device_id);

function positionOf(cursor: string): CarPosition {
  const { at, id } = decodePageCursor(cursor, isValidDeviceId);
  return { provisionedAt: at, deviceId: id };
}

export function createCarService(deps: {
  db: Db;
  clock: Clock;
  /** Where a car the service disconnects becomes a `car.offline` event for its owner. */
  webhookEvents?: WebhookEvents;
  credentials: CredentialStore;
  broker: BrokerAccounts;
  /** Seals the secret kept in SQL. */
  keyRing: KeyRing;
}) {
  const { db, clock, credentials, broker, keyRing } = deps;

  /**
   * A new secret for `account`: kept in SQL first (its hash, and itself sealed), the record the
   * key-value store and the broker are rebuilt from; then its hash in the key-value store, then
   * the broker. A step after SQL that fails is made good by the next sync, or undone.
   */
  async function issueCredential(account: BrokerAccount): Promise<MqttCredential> {
    const password = newBrokerSecret();
    const secretSha256 = hashBrokerSecret(password);
    await putBrokerCredential(
      db,
      {
        username: account.username,
        role: account.role,
        brand: account.brand,
        secretSha256,
        secret: keyRing.seal(password, secretContext(account.username)),
      },
      clock(),
    );
    await credentials.put(account.username, { role: account.role, brand: account.brand, secretSha256 });
    await broker.put(account, password);
    return { client_id: account.username, username: account.username, password };
  }

  /**
   * The credential goes before the record, so that nothing can connect for a car that is gone; SQL
   * first, so that a sync never gives back what a decommission cut short had begun to take.
   */
  async function revokeCredential(username: string): Promise<void> {
    await deleteBrokerCredential(db, username);
    await credentials.delete(username);
    await broker.remove(username);
  }

  /** Runs `issue`; when it fails, the record just made is taken back and the credential revoked. */
  async function issueOrUndo(account: BrokerAccount, undo: () => Promise<unknown>): Promise<MqttCredential> {
    try {
      return await issueCredential(account);
    } catch (error) {
      await revokeCredential(account.username).catch(() => {});
      await undo().catch(() => {});
      throw error;
    }
  }

  return {
    /** The car, when the caller may see it; otherwise the 404 of a car that does not exist. */
    async visible(principal: Principal, deviceId: string): Promise<CarRow> {
      return visibleCar(principal, deviceId, await findCar(db, deviceId));
    },

    async provision(car: ParsedDeviceId): Promise<{ car: Car; mqtt: MqttCredential }> {
      const row = await insertCar(db, {
        device_id: car.deviceId,
        brand: car.brand,
        provisioned_at: clock(),
        owner_id: null,
        paired_at: null,
      });
      if (!row) {
        throw new ConflictError('car_exists', `The car ${car.deviceId} is provisioned already.`);
      }
      const mqtt = await issueOrUndo(carAccount(car), () => deleteCar(db, row.device_id));
      return { car: toApiCar(row), mqtt };
    },

    /**
     * The cars `principal` may see, a page at a time: an admin's are every car, anyone else's
     * those they own. With `device_id`, that car alone, or none when it is not one of those.
     */
    async list(principal: Principal, query: { device_id?: string; limit?: number; cursor?: string }) {
      if (query.device_id !== undefined) {
        const row = await findCarSummary(db, query.device_id);
        const seen = row && maySeeCar(principal, row);
        return { cars: seen ? [toApiCarSummary(row)] : [], next_cursor: null };
      }
      const limit = query.limit ?? 50;
      const rows = await listCars(db, {
        limit,
        after: query.cursor ? positionOf(query.cursor) : undefined,
        ownerId: principal.isAdmin ? undefined : principal.accountId,
      });
      const page = rows.slice(0, limit);
      const last = page.at(-1);
      return {
        cars: page.map(toApiCarSummary),
        next_cursor: rows.length > limit && last ? cursorOf(last) : null,
      };
    },

    async rotate(car: ParsedDeviceId): Promise<MqttCredential> {
      const { deviceId } = car;
      const row = await findCar(db, deviceId);
      if (!row) throw carNotFound(deviceId);
      const credential = await issueCredential(carAccount(car));
      // The car was disconnected, but Mosquitto sends no will for a client it disconnects itself:
      // the car is offline until it signs in with the new secret (and says online, at a later `at`).
      const at = clock();
      await db.transaction(async (trx) => {
        const wasOnline = await lockPresence(trx, deviceId);
        await endPresence(trx, deviceId, at);
        const presence = { deviceId, wasOnline, online: false, at: at.toISOString() };
        await presenceChanged(trx, deps.webhookEvents, presence);
      });
      return credential;
    },

    async decommission({ deviceId }: ParsedDeviceId): Promise<void> {
      const row = await findCar(db, deviceId);
      if (!row) throw carNotFound(deviceId);
      await revokeCredential(deviceId);
      await deleteCar(db, deviceId);
    },

    async createConnector(input: { brand: Brand; name: string }) {
      const row = await insertConnector(db, { brand: input.brand, name: input.name, created_at: clock() });
      if (!row) {
        throw new ConflictError(
          'connector_exists',
          `The ${input.brand} connector "${input.name}" exists already: choose another name, or rotate its credential.`,
        );
      }
      const mqtt = await issueOrUndo(connectorAccount(row), () => deleteConnector(db, row.brand, row.name));
      return { connector: toApiConnector(row), mqtt };
    },

    async listConnectors(): Promise<Connector[]> {
      return (await listConnectors(db)).map(toApiConnector);
    },

    async rotateConnector(brand: Brand, name: string): Promise<MqttCredential> {
      const row = await findConnector(db, brand, name);
      if (!row) throw connectorNotFound(brand, name);
      return issueCredential(connectorAccount(row));
    },

    async removeConnector(brand: Brand, name: string): Promise<void> {
      const row = await findConnector(db, brand, name);
      if (!row) throw connectorNotFound(brand, name);
      await revokeCredential(connectorUsername(brand, name));
      await deleteConnector(db, brand, name);
    },
  };
}

function connectorNotFound(brand: string, name: string): NotFoundError {
  return new NotFoundError('connector_not_found', `No ${brand} connector is called "${name}".`);
}

export type CarService = ReturnType<typeof createCarService>;
