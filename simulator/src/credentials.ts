/**
 * Credentials files: a JSON list with one entry per car, in any of the shapes an operator has at
 * hand — `{device_id, password}` (what the simulator saves), the admin API's answer to
 * `POST /api/v1/admin/cars` as it came (`{car: {device_id}, mqtt: {username, password}}`), or to
 * `POST /api/v1/admin/cars/{device_id}/credential` (`{username, password}`).
 */
import { open, readFile, unlink } from 'node:fs/promises';
import { validateDeviceId } from '@svc/sdk';
import type { CarCredential } from './car.ts';
import { SimulatorError } from './errors.ts';

/** What each entry may look like, for the messages that refuse one. */
export const credentialShapes =
  '{"device_id", "password"}, a provisioning answer {"car": {"device_id", …}, "mqtt": {"username", "password", …}}, or a credential {"username", "password"} (user name = the device id)';

type Fields = Record<string, unknown>;

const isObject = (value: unknown): value is Fields =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The device id and password an entry names, and the other names it gives the car (which must agree). */
function fieldsOf(entry: unknown): { deviceId: unknown; password: unknown; aliases: unknown[] } | undefined {
  if (!isObject(entry)) return undefined;
  if ('car' in entry || 'mqtt' in entry) {
    const { car, mqtt } = entry;
    if (!isObject(car) || !isObject(mqtt)) return undefined;
    return { deviceId: car.device_id, password: mqtt.password, aliases: [mqtt.username, mqtt.client_id] };
  }
  if ('device_id' in entry) {
    return {
      deviceId: entry.device_id,
      password: entry.password,
      aliases: [entry.username, entry.client_id],
    };
  }
  if ('username' in entry) {
    return { deviceId: entry.username, password: entry.password, aliases: [entry.client_id] };
  }
  return undefined;
}

function toCredential(entry: unknown, where: string): CarCredential {
  const fields = fieldsOf(entry);
  if (
    !fields ||
    typeof fields.deviceId !== 'string' ||
    typeof fields.password !== 'string' ||
    fields.password === ''
  ) {
    throw new SimulatorError(`${where}: expected ${credentialShapes}`);
  }
  const { deviceId, password } = fields;
  try {
    validateDeviceId(deviceId);
  } catch (error) {
    throw new SimulatorError(`${where}: ${(error as Error).message}`);
  }
  // A car signs in with client id = user name = device id: an entry naming two cars is a mix-up.
  for (const alias of fields.aliases) {
    if (alias !== undefined && alias !== deviceId) {
      throw new SimulatorError(
        `${where}: its user name and client id must be its device id ${deviceId}, not ${JSON.stringify(alias).slice(0, 80)}`,
      );
    }
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
      `${path} must hold a JSON list [ … ] with one entry per car: ${credentialShapes}`,
    );
  }
  const credentials = entries.map((entry, index) => toCredential(entry, `${path}, car ${index + 1}`));
  const seen = new Set<string>();
  for (const { deviceId } of credentials) {
    // Two cars with one client id would throw each other off the broker, over and over.
    if (seen.has(deviceId)) throw new SimulatorError(`${path} lists ${deviceId} twice`);
    seen.add(deviceId);
  }
  return credentials;
}

export interface NewCredentialsFile {
  /** Writes the credentials (readable by the owner only) and closes the file. */
  save(credentials: readonly CarCredential[]): Promise<void>;
  /** Nothing to save after all (provisioning failed): the empty file goes. */
  discard(): Promise<void>;
}

/**
 * Claims a new file for credentials, before any car is provisioned: a path that cannot be written
 * fails while no password can be lost yet, and an existing file is never overwritten, as it may
 * hold the only copy of other cars' passwords.
 */
export async function createCredentialsFile(path: string): Promise<NewCredentialsFile> {
  let file: Awaited<ReturnType<typeof open>>;
  try {
    file = await open(path, 'wx', 0o600);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') {
      throw new SimulatorError(
        `${path} exists already and may hold the passwords of cars provisioned before: run those with --credentials ${path}, or save the new ones to another file`,
      );
    }
    const reason = code === 'ENOENT' ? 'no such folder' : (error as Error).message;
    throw new SimulatorError(`cannot write the credentials file ${path}: ${reason}`);
  }
  // The umask may have narrowed open's mode: passwords are for the owner to read and write, exactly.
  await file.chmod(0o600);
  return {
    async save(credentials) {
      const entries = credentials.map(({ deviceId, password }) => ({ device_id: deviceId, password }));
      try {
        await file.writeFile(`${JSON.stringify(entries, null, 2)}\n`);
      } finally {
        await file.close();
      }
    },
    async discard() {
      await file.close();
      await unlink(path).catch(() => {});
    },
  };
}

/** Saves credentials to a new file (see createCredentialsFile), for a later `--credentials` run. */
export async function writeCredentialsFile(
  path: string,
  credentials: readonly CarCredential[],
): Promise<void> {
  const file = await createCredentialsFile(path);
  await file.save(credentials);
}
