/**
 * MQTT for tests: a plain in-process aedes (a real broker, without the service's auth and ACL,
 * which the broker tests cover) on a free port, and cars publishing to it with mqtt.js as a car
 * would (its credential as user name, a retained `offline` last will).
 */

import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:net';
import { Aedes } from 'aedes';
import mqtt, { type MqttClient } from 'mqtt';
import { type CarTopicSuffix, carTopic, carTopicQos, carTopicRetain } from '../../../generated/mqtt.ts';

export interface PlainBroker {
  url: string;
  close(): Promise<void>;
}

export async function startPlainBroker(): Promise<PlainBroker> {
  const broker = await Aedes.createBroker();
  const server: Server = createServer(broker.handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `mqtt://127.0.0.1:${port}`,
    async close() {
      await new Promise<void>((resolve) => broker.close(() => resolve()));
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The broker connection of a service's bridge to the plain broker (any credential is let in). */
export function bridgeConnection(broker: PlainBroker) {
  return { url: broker.url, username: 'svc-bridge', password: 'not checked by the plain broker' };
}

export interface TestCar {
  deviceId: string;
  brand: string;
  nativeId: string;
  client: MqttClient;
  /** Publishes `payload` (an object as JSON, or bytes as they are) as the contract says for `suffix`. */
  publish(suffix: CarTopicSuffix, payload: unknown, options?: { topic?: string }): Promise<void>;
  /** Publishes on a topic of another car, or none at all: what the broker ACL would refuse. */
  publishOn(topic: string, payload: unknown, suffix: CarTopicSuffix): Promise<void>;
  end(): Promise<void>;
  /** Drops off without a word: the broker publishes the last will. */
  vanish(): void;
}

function bytesOf(payload: unknown): Buffer {
  return Buffer.isBuffer(payload) ? payload : Buffer.from(JSON.stringify(payload));
}

export async function connectCar(broker: PlainBroker, deviceId: string, willAt: string): Promise<TestCar> {
  const colon = deviceId.indexOf(':');
  const brand = deviceId.slice(0, colon);
  const nativeId = deviceId.slice(colon + 1);
  const client = await mqtt.connectAsync(broker.url, {
    clientId: deviceId,
    username: deviceId,
    password: 'the car secret',
    reconnectPeriod: 0,
    will: {
      topic: carTopic(brand, nativeId, 'presence'),
      payload: bytesOf({ device_id: deviceId, brand, state: 'offline', at: willAt }),
      qos: carTopicQos.presence,
      retain: carTopicRetain.presence,
    },
  });
  const publishOn = async (topic: string, payload: unknown, suffix: CarTopicSuffix) => {
    await client.publishAsync(topic, bytesOf(payload), {
      qos: carTopicQos[suffix],
      retain: carTopicRetain[suffix],
    });
  };
  return {
    deviceId,
    brand,
    nativeId,
    client,
    publish: (suffix, payload) => publishOn(carTopic(brand, nativeId, suffix), payload, suffix),
    publishOn,
    end: () => client.endAsync(),
    vanish: () => {
      client.stream.destroy();
    },
  };
}

/** Signs in as a car or connector would (its client id is its user name); true when let in. */
export async function signsIn(url: string, username: string, password: string): Promise<boolean> {
  try {
    const client = await mqtt.connectAsync(
      url,
      {
        username,
        password,
        clientId: username,
        protocolVersion: 4,
        reconnectPeriod: 0,
        connectTimeout: 5000,
      },
      false,
    );
    await client.endAsync();
    return true;
  } catch {
    return false;
  }
}
