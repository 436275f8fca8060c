/** Cars for tests: provisioned by an admin, and owned as pairing would leave them. */
import assert from 'node:assert/strict';
import type { Developer } from './accounts.ts';
import { call } from './http.ts';
import type { TestService } from './service.ts';

/**
 * Device ids of a test file's own, `brand:topic-<pid>-<n>`: a new one each call, never one of
 * another file's, for files that run at once share this machine's broker.
 */
export function deviceIds(topic: string, brand = 'brand_b'): () => string {
  let serial = 0;
  return () => `${brand}:${topic}-${process.pid}-${++serial}`;
}

export async function provisionCar(service: TestService, admin: Developer, deviceId: string) {
  const made = await call(service.url, 'POST', '/api/v1/admin/cars', {
    token: admin.token,
    body: { device_id: deviceId, brand: deviceId.slice(0, deviceId.indexOf(':')) },
  });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  return made.body as { car: { device_id: string }; mqtt: { username: string; password: string } };
}

/**
 * Makes `owner` the car's owner straight in the store, as a pairing does: the tests of who may
 * see and move a car need an owner, not the pairing that makes one (tested with pairing).
 */
export async function makeOwner(service: TestService, deviceId: string, owner: { accountId: string }) {
  const updated = await service.store
    .db('cars')
    .where({ device_id: deviceId })
    .update({ owner_id: owner.accountId, paired_at: new Date(service.clock.now) });
  assert.equal(updated, 1, `no car ${deviceId} to own`);
}

/** The car's owner as the store has it: null when unpaired. */
export async function ownerOf(service: TestService, deviceId: string): Promise<string | null> {
  const row = await service.store.db('cars').where({ device_id: deviceId }).first('owner_id');
  return row?.owner_id ?? null;
}

export const carPath = (deviceId: string, what: string) =>
  `/api/v1/cars/${encodeURIComponent(deviceId)}/${what}`;

/** A car's status report as the contract (asyncapi/) has it: parked, doors locked, no apps. */
export function statusReport(deviceId: string, brand: string, reportedAt: number): string {
  return JSON.stringify({
    device_id: deviceId,
    brand,
    reported_at: new Date(reportedAt).toISOString(),
    host_version: '2.14.0',
    state: { ignition: false, doors_locked: true },
    installed_apps: [],
  });
}
