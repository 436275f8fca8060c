/**
 * Credentials files: a JSON list of `{device_id, password}`. Also read: the admin API's answers to
 * `POST /api/v1/admin/cars` (`{car: {device_id}, mqtt: {password}}`) as they were saved.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { validateDeviceId } from '@svc/sdk';
import type { CarCredential } from './car.ts';
import { SimulatorError } from './errors.ts';

interface Entry {
  device_id?: unknown;
  password?: unknown;
  car?: { device_id?: unknown };
  mqtt?: { password?: unknown };
}

function toCredential(entry: Entry, where: string): CarCredential {
  const deviceId = entry?.device_id ?? entry?.car?.device_id;
  const password = entry?.password ?? entry?.mqtt?.password;
  if (typeof deviceId !== 'string' || typeof password !== 'string' || password === '') {
    throw new SimulatorError(`${where}: expected {"device_id": "...", "password": "..."}`);
  }
  try {
    validateDeviceId(deviceId);
  } catch (error) {
    throw new SimulatorError(`${where}: ${(error as Error).message}`);
  }
  return { deviceId, password };
}

export async function readCredentialsFile(path: string): Promise<CarCredential[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    const reason =
      (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message;
    throw new SimulatorError(`cannot read the credentials file ${path}: ${reason}`);
  }
  let entries: unknown;
  try {
    entries = JSON.parse(text);
  } catch (error) {
    throw new SimulatorError(`${path} is not JSON: ${(error as Error).message}`);
  }
  if (!Array.isArray(entries) || entries.length === 0) {
    throw new SimulatorError(
      `${path} must hold a JSON list of {"device_id": "...", "password": "..."}, one per car`,
    );
  }
  const credentials = entries.map((entry, index) =>
    toCredential(entry as Entry, `${path}, car ${index + 1}`),
  );
  const seen = new Set<string>();
  for (const { deviceId } of credentials) {
    // Two cars with one client id would throw each other off the broker, over and over.
    if (seen.has(deviceId)) throw new SimulatorError(`${path} lists ${deviceId} twice`);
    seen.add(deviceId);
  }
  return credentials;
}

/** Saves credentials for a later `--credentials` run; readable by the owner only, as they hold passwords. */
export async function writeCredentialsFile(
  path: string,
  credentials: readonly CarCredential[],
): Promise<void> {
  const entries = credentials.map(({ deviceId, password }) => ({ device_id: deviceId, password }));
  await writeFile(path, `${JSON.stringify(entries, null, 2)}\n`, { mode: 0o600 });
}
