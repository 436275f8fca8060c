/**
 * Presence when cars come and go quickly: a car that connects and drops many times ends where it
 * last was, and presence messages that arrive out of order (an old connection's last will after
 * the new connection's `online`) leave the newest in place. Through the bridge against a plain
 * aedes, as in bridge.test.ts.
 */
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin } from './support/accounts.ts';
import { deviceIds, provisionCar } from './support/cars.ts';
import { call, eventually } from './support/http.ts';
import { sample, scrape } from './support/metrics.ts';
import { bridgeConnection, connectCar, type PlainBroker, startPlainBroker } from './support/mqtt.ts';
import { startTestService, type TestService } from './support/service.ts';

const newDeviceId = deviceIds('presence');
/** The time a car made its n-th connection: its will and its `online` carry it (the contract). */
const connectionAt = (n: number) => new Date(Date.parse('2026-11-21T09:00:00Z') + n * 1000).toISOString();
const presence = (deviceId: string, state: 'online' | 'offline', at: string) => ({
  device_id: deviceId,
  brand: 'brand_b',
  state,
  at,
});

describe('car presence', () => {
  let broker: PlainBroker;
  let service: TestService;
  let admin: Developer;

  const online = async (deviceId: string) =>
    (
      await call(service.url, 'GET', `/api/v1/cars/${encodeURIComponent(deviceId)}/status`, {
        token: admin.token,
      })
    ).body.online;
  const presenceStored = async () =>
    sample(await scrape(service), 'svc_mqtt_messages_total', { suffix: 'presence', outcome: 'stored' });

  /** Connects as its n-th connection, says online, and drops off without a word (its will fires). */
  async function flap(deviceId: string, n: number): Promise<void> {
    const car = await connectCar(broker, deviceId, connectionAt(n));
    await car.publish('presence', presence(deviceId, 'online', connectionAt(n)));
    car.vanish();
  }

  beforeAll(async () => {
    broker = await startPlainBroker();
    service = await startTestService(
      { SVC_ADMIN_EMAILS: 'root@example.com' },
      { bridge: { brokerConnection: bridgeConnection(broker) } },
    );
    admin = await signUpAdmin(service, 'root@example.com');
  });
  afterAll(async () => {
    await service?.stop();
    await broker?.close();
  });

  test('when cars connect and drop many times quickly then each ends as it last was, and connected cars agrees', async () => {
    const stays = newDeviceId();
    const leaves = newDeviceId();
    await provisionCar(service, admin, stays);
    await provisionCar(service, admin, leaves);
    const connectedBefore = sample(await scrape(service), 'svc_mqtt_connected_cars');
    const storedBefore = await presenceStored();
    const flaps = 15;

    // Both cars at once: each connection's `online`, then its will.
    await Promise.all(
      [stays, leaves].map(async (deviceId) => {
        for (let n = 1; n <= flaps; n += 1) await flap(deviceId, n);
      }),
    );
    const last = await connectCar(broker, stays, connectionAt(flaps + 1));
    try {
      await last.publish('presence', presence(stays, 'online', connectionAt(flaps + 1)));
      // Every presence message is handled: two per flap and car, and the last `online`.
      await eventually(
        'every presence message is stored',
        async () => (await presenceStored()) === storedBefore + 4 * flaps + 1,
      );
      assert.equal(await online(stays), true, 'the car that stayed connected is online');
      assert.equal(await online(leaves), false, 'the car that dropped off is offline');
      assert.equal(sample(await scrape(service), 'svc_mqtt_connected_cars'), connectedBefore + 1);
    } finally {
      await last.end();
    }
  });

  test("when an old connection's last will arrives after the new connection's online then the car stays online", async () => {
    const deviceId = newDeviceId();
    await provisionCar(service, admin, deviceId);
    const car = await connectCar(broker, deviceId, connectionAt(2));
    // Someone else relays the first connection's will late, as a broker or a bridge in between may.
    const relay = await connectCar(broker, newDeviceId(), connectionAt(0));
    try {
      await car.publish('presence', presence(deviceId, 'online', connectionAt(2)));
      await eventually('the car is online', async () => (await online(deviceId)) === true);
      const storedBefore = await presenceStored();
      await relay.publishOn(
        `cars/brand_b/${deviceId.slice('brand_b:'.length)}/presence`,
        presence(deviceId, 'offline', connectionAt(1)),
        'presence',
      );
      await eventually('the late will is handled', async () => (await presenceStored()) === storedBefore + 1);
      assert.equal(await online(deviceId), true);

      // Its own connection's will, which carries the same time as its `online`, does make it offline.
      car.vanish();
      await eventually('the car is offline', async () => (await online(deviceId)) === false);
    } finally {
      await relay.end();
    }
  });
});
