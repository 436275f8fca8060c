/**
 * Commands and pairing for tests: simulated cars whose screen the test reads (the pairing code),
 * pairing an owner as a person would, following a command to its state, publishing a mini-app,
 * and a bare mqtt.js car that acknowledges only when the test says so.
 */
import assert from 'node:assert/strict';
import {
  type CarCredential,
  type Simulator,
  type SimulatorOptions,
  startSimulator,
} from '@svc/car-simulator';
import mqtt, { type MqttClient } from 'mqtt';
import { type CarCommand, carTopic, carTopicQos, carTopicRetain } from '../../../generated/mqtt.ts';
import type { Developer } from './accounts.ts';
import { call, eventually, putPackage, type Reply, sameUrlOn } from './http.ts';
import { makePackage, manifestFor } from './packages.ts';

const quiet = { write: () => true };

/** A fleet whose screens the test reads: each line a car showed (its pairing codes). */
export interface WatchedSimulator extends Simulator {
  shown: string[];
  /** The codes `deviceId` showed, oldest first. */
  codesShownBy(deviceId: string): string[];
}

export async function startWatchedSimulator(
  mqttUrl: string,
  cars: CarCredential[],
  /** What the cars start with (`installedApps`), and how often they send a fix, when not as here. */
  options: Pick<SimulatorOptions, 'installedApps' | 'telemetryEveryMs'> = {},
): Promise<WatchedSimulator> {
  const shown: string[] = [];
  const simulator = await startSimulator({
    mqttUrl,
    cars,
    statusEveryMs: 60_000,
    telemetryEveryMs: 60_000,
    reconnectPeriodMs: 100,
    ...options,
    output: { write: (text: string) => shown.push(...text.split('\n').filter(Boolean)) },
    warnings: quiet,
  });
  return Object.assign(simulator, {
    shown,
    codesShownBy(deviceId: string) {
      const prefix = `car ${deviceId} shows pairing code `;
      return shown.filter((line) => line.startsWith(prefix)).map((line) => line.slice(prefix.length));
    },
  });
}

export const carPath = (deviceId: string, rest: string) =>
  `/api/v1/cars/${encodeURIComponent(deviceId)}/${rest}`;

export function commandsOf(base: string) {
  const send = (token: string, deviceId: string, body: unknown) =>
    call(base, 'POST', carPath(deviceId, 'commands'), { token, body });
  const read = (token: string, deviceId: string, commandId: string) =>
    call(base, 'GET', carPath(deviceId, `commands/${commandId}`), { token });
  return {
    send,
    read,
    list: (token: string, deviceId: string, query = '') =>
      call(base, 'GET', carPath(deviceId, `commands${query}`), { token }),
    pair: (token: string, deviceId: string, body?: unknown) =>
      call(base, 'POST', carPath(deviceId, 'pair'), { token, ...(body === undefined ? {} : { body }) }),
    /** Waits until the command is in `state`; fails with where it stands instead. */
    async until(token: string, deviceId: string, commandId: string, state: string, timeoutMs = 15_000) {
      let last: Reply | undefined;
      try {
        await eventually(
          `command ${commandId} ${state}`,
          async () => {
            last = await read(token, deviceId, commandId);
            return last.body?.state === state;
          },
          timeoutMs,
        );
      } catch (error) {
        throw new Error(`${(error as Error).message}; last seen: ${JSON.stringify(last?.body)}`);
      }
      return last?.body;
    },
  };
}

/** The version of `appId` the car last reported, as the service has it: the car's own word. */
export async function reportedVersion(
  base: string,
  token: string,
  deviceId: string,
  appId: string,
): Promise<string | undefined> {
  const install = await call(base, 'GET', carPath(deviceId, 'install'), { token });
  assert.equal(install.status, 200, JSON.stringify(install.body));
  return install.body.installed_apps.find((app: { app_id: string }) => app.app_id === appId)?.version;
}

/** The car's `app.install` commands of `appId`, newest first. */
export async function installsOf(base: string, token: string, deviceId: string, appId: string) {
  const listed = await commandsOf(base).list(token, deviceId);
  assert.equal(listed.status, 200, JSON.stringify(listed.body));
  return listed.body.commands.filter(
    (command: { name: string; args: { app_id?: string } }) =>
      command.name === 'app.install' && command.args.app_id === appId,
  ) as { state: string; args: { version?: string } }[];
}

/**
 * Pairs `owner` with a connected simulated car as a person would: asks for a code, reads it off
 * the car's screen, types it back.
 */
export async function pairWithShownCode(
  base: string,
  owner: Developer,
  simulator: WatchedSimulator,
  deviceId: string,
): Promise<void> {
  const commands = commandsOf(base);
  const before = simulator.codesShownBy(deviceId).length;
  const asked = await commands.pair(owner.token, deviceId);
  assert.equal(asked.status, 202, JSON.stringify(asked.body));
  await eventually('the car shows a pairing code', () => simulator.codesShownBy(deviceId).length > before);
  const code = simulator.codesShownBy(deviceId).at(-1);
  const paired = await commands.pair(owner.token, deviceId, { code });
  assert.equal(paired.status, 200, JSON.stringify(paired.body));
}

/**
 * A version of a new mini-app taken to `published` by its developer and an admin, with `manifest`
 * added to its manifest (its `brands`); its id.
 */
export async function publishMiniApp(
  base: string,
  developer: Developer,
  admin: Developer,
  appId: string,
  version: string,
  until: 'submitted' | 'approved' | 'published' = 'published',
  manifest: Record<string, unknown> = {},
): Promise<string> {
  const pkg = makePackage(manifestFor(appId, version, manifest));
  const target = await call(base, 'POST', '/api/v1/mini-apps/upload-url', {
    token: developer.token,
    body: { app_id: pkg.appId, version: pkg.version, size: pkg.size, sha256: pkg.sha256 },
  });
  assert.equal(target.status, 201, JSON.stringify(target.body));
  // On the service at `base`, even when its SVC_PUBLIC_URL names another host.
  assert.equal((await putPackage(sameUrlOn({ url: base }, target.body.upload_url), pkg.bytes)).status, 201);
  const submitted = await call(base, 'POST', '/api/v1/mini-apps/submit', {
    token: developer.token,
    body: { upload_id: target.body.upload_id },
  });
  assert.equal(submitted.status, 201, JSON.stringify(submitted.body));
  const versionId = submitted.body.id as string;
  await reviewVersion(base, developer, admin, versionId, until);
  return versionId;
}

/**
 * Takes a submitted version through review (DESIGN §8): an admin takes it in review and approves
 * it, then its developer releases it, stopping at `until`.
 */
export async function reviewVersion(
  base: string,
  developer: Pick<Developer, 'token'>,
  admin: Pick<Developer, 'token'>,
  versionId: string,
  until: 'submitted' | 'approved' | 'published' = 'published',
): Promise<void> {
  const moves: [Pick<Developer, 'token'>, string][] = [
    [admin, 'in_review'],
    [admin, 'approved'],
    [developer, 'published'],
  ];
  for (const [who, to] of moves.slice(0, { submitted: 0, approved: 2, published: 3 }[until])) {
    const moved = await call(base, 'POST', `/api/v1/mini-apps/versions/${versionId}/transitions`, {
      token: who.token,
      body: { to },
    });
    assert.equal(moved.status, 200, JSON.stringify(moved.body));
  }
}

/**
 * A car on mqtt.js, as bare as the contract allows: subscribes to its `cmd`, says `online`, keeps
 * every command it receives, and acknowledges only when told to.
 */
export interface BareCar {
  deviceId: string;
  client: MqttClient;
  received: CarCommand[];
  ack(
    commandId: string,
    outcome: 'accepted' | 'completed' | 'failed' | 'rejected',
    detail?: string,
  ): Promise<void>;
  /** Publishes on its own `cmd/ack` topic a payload of the test's choosing. */
  publishAck(payload: unknown): Promise<void>;
  /** Reconnects after a drop on its own, and says `online` again each time. */
  end(): Promise<void>;
}

export async function connectBareCar(mqttUrl: string, credential: CarCredential): Promise<BareCar> {
  const { deviceId } = credential;
  const colon = deviceId.indexOf(':');
  const brand = deviceId.slice(0, colon);
  const nativeId = deviceId.slice(colon + 1);
  const topic = (suffix: 'cmd' | 'cmd/ack' | 'presence') => carTopic(brand, nativeId, suffix);
  const presence = (state: string, at: string) => JSON.stringify({ device_id: deviceId, brand, state, at });
  let connectedAt = new Date().toISOString();
  const client = await mqtt.connectAsync(mqttUrl, {
    clientId: deviceId,
    username: deviceId,
    password: credential.password,
    clean: true,
    protocolVersion: 4,
    reconnectPeriod: 100,
    will: {
      topic: topic('presence'),
      payload: Buffer.from(presence('offline', connectedAt)),
      qos: 1,
      retain: true,
    },
  });
  const received: CarCommand[] = [];
  client.on('message', (_topic, payload) => received.push(JSON.parse(payload.toString('utf8'))));
  const announce = () =>
    client.publishAsync(topic('presence'), presence('online', connectedAt), {
      qos: carTopicQos.presence,
      retain: carTopicRetain.presence,
    });
  client.on('reconnect', () => {
    connectedAt = new Date().toISOString();
    client.options.will = {
      topic: topic('presence'),
      payload: Buffer.from(presence('offline', connectedAt)),
      qos: 1,
      retain: true,
    };
  });
  // mqtt.js subscribes again before this runs (a clean session), as the contract asks.
  client.on('connect', () => void announce().catch(() => {}));
  await client.subscribeAsync(topic('cmd'), { qos: carTopicQos.cmd });
  await announce();
  const publishAck = async (payload: unknown) => {
    await client.publishAsync(topic('cmd/ack'), JSON.stringify(payload), { qos: carTopicQos['cmd/ack'] });
  };
  return {
    deviceId,
    client,
    received,
    ack: (commandId, outcome, detail) =>
      publishAck({
        command_id: commandId,
        device_id: deviceId,
        brand,
        outcome,
        ...(detail ? { detail } : {}),
        at: new Date().toISOString(),
      }),
    publishAck,
    end: () => client.endAsync(),
  };
}
