/**
 * The one ACL test table (DESIGN §9), run against every broker the service can use: the same cars,
 * connector and checks on the embedded broker and on Mosquitto. Nothing here waits for time to
 * pass: a message "not delivered" is one that did not arrive before a sentinel published after it.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { connectAsync, ErrorWithSubackPacket, type IClientOptions, type MqttClient } from 'mqtt';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin } from './accounts.ts';
import { call, eventually } from './http.ts';
import type { TestService } from './service.ts';

/** The admin the table provisions with: the service under test lists it in SVC_ADMIN_EMAILS. */
export const aclAdminEmail = 'acl-admin@example.com';

export interface SignIn {
  username: string;
  password: string;
  clientId: string;
}

export interface BrokerUnderTest {
  service: TestService;
  /** A sign-in with the service's row of the table: it sees the car topics and sends commands. */
  observer: SignIn;
  stop(): Promise<void>;
}

/** MQTT 3.1.1 CONNACK codes a broker may refuse a sign-in with: bad user name or password, not authorized. */
const refusedSignIn = [4, 5];
const subscriptionFailure = 128;

let serial = 0;
/** A VIN no other car of this run (or of an earlier run on a shared store) has. */
export function newVin(): string {
  serial += 1;
  const tail = `${Date.now().toString(36).toUpperCase()}${serial}`.replace(/[IOQ]/g, 'X');
  return `ACL${tail}`.padEnd(17, '0').slice(0, 17);
}

/** What one client has received, in order, with a wait for one payload. */
class Inbox {
  readonly payloads: string[] = [];
  private readonly waiting = new Map<string, () => void>();
  constructor(client: MqttClient) {
    client.on('message', (_topic, payload) => {
      const text = payload.toString();
      this.payloads.push(text);
      this.waiting.get(text)?.();
    });
  }
  /** Resolves when `payload` arrives (or has arrived). */
  receives(payload: string): Promise<void> {
    if (this.payloads.includes(payload)) return Promise.resolve();
    return new Promise((resolve) => this.waiting.set(payload, resolve));
  }
  has(payload: string): boolean {
    return this.payloads.includes(payload);
  }
}

function closed(client: MqttClient): Promise<'closed'> {
  return new Promise((resolve) => client.once('close', () => resolve('closed')));
}

export function describeBrokerAcl(name: string, start: () => Promise<BrokerUnderTest>): void {
  describe(`the broker ACL table, on ${name}`, () => {
    let broker: BrokerUnderTest;
    let admin: Developer;
    let observer: MqttClient;
    let seen: Inbox;
    const cars: Record<'a1' | 'a2' | 'b1', SignIn & { brand: string; nativeId: string }> = {} as never;
    let connector: SignIn;
    const open: MqttClient[] = [];

    const asAdmin = (method: string, path: string, body?: unknown) =>
      call(broker.service.url, method, path, { token: admin.token, body });

    async function connect(who: SignIn, options: IClientOptions = {}): Promise<MqttClient> {
      const client = await connectAsync(broker.service.mqttUrl, {
        username: who.username,
        password: who.password,
        clientId: who.clientId,
        protocolVersion: 4,
        clean: true,
        reconnectPeriod: 0,
        ...options,
      });
      // A refused publish may end the connection; that is an outcome here, not a test failure.
      client.on('error', () => {});
      open.push(client);
      return client;
    }

    /** The CONNACK code a sign-in is refused with; fails the test if it is accepted. */
    async function refusal(who: SignIn): Promise<number | undefined> {
      try {
        const client = await connect(who);
        await client.endAsync();
      } catch (error) {
        return (error as { code?: number }).code;
      }
      assert.fail(`${who.username} connected with client id ${who.clientId}`);
    }

    async function provisionCar(deviceId: string): Promise<SignIn & { brand: string; nativeId: string }> {
      const [brand = '', nativeId = ''] = deviceId.split(':');
      const made = await asAdmin('POST', '/api/v1/admin/cars', { device_id: deviceId, brand });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      const { username, password, client_id } = made.body.mqtt;
      return { username, password, clientId: client_id, brand, nativeId };
    }

    const topic = (car: { brand: string; nativeId: string }, suffix: string) =>
      `cars/${car.brand}/${car.nativeId}/${suffix}`;

    /** Publishes `topic` as `who` and waits until `inbox` (by default the observer's) has it. */
    async function assertDelivered(client: MqttClient, to: string, inbox = seen): Promise<void> {
      const payload = randomUUID();
      const arrives = inbox.receives(payload);
      await client.publishAsync(to, payload, { qos: 1 });
      await arrives;
    }

    /**
     * Publishes `to` as `who`, then a sentinel on `sentinelTopic` (one `who` may publish and the
     * observer sees) from the same client; once the sentinel is through, the refused message
     * would have been before it. A broker that disconnects the client for the refused publish
     * (aedes) has dropped it before closing: the sentinel then goes on a new connection.
     */
    async function assertNotDelivered(
      who: SignIn,
      client: MqttClient,
      to: string,
      sentinelTopic: string,
      inbox = seen,
    ): Promise<void> {
      const refused = randomUUID();
      const sentinel = randomUUID();
      const sentinelSeen = seen.receives(sentinel);
      const ended = closed(client);
      client.publish(to, refused, { qos: 1 }, () => {});
      const sentinelAcked = client.publishAsync(sentinelTopic, sentinel, { qos: 1 });
      sentinelAcked.catch(() => {});
      const first = await Promise.race([Promise.all([sentinelAcked, sentinelSeen]), ended]);
      if (first === 'closed') {
        const again = await connect(who);
        await again.publishAsync(sentinelTopic, sentinel, { qos: 1 });
        await sentinelSeen;
        await again.endAsync();
      }
      assert.ok(!inbox.has(refused), `${to} was delivered`);
    }

    /** The QoS the broker grants `filter` in its SUBACK: 128 is its refusal. */
    async function grantedQos(client: MqttClient, filter: string): Promise<number | undefined> {
      try {
        return (await client.subscribeAsync(filter, { qos: 1 }))[0]?.qos;
      } catch (error) {
        // mqtt.js rejects a SUBACK that refuses, and keeps the packet.
        if (error instanceof ErrorWithSubackPacket) return error.packet.granted[0] as number | undefined;
        throw error;
      }
    }

    async function assertSubscription(client: MqttClient, filter: string, allowed: boolean): Promise<void> {
      const qos = await grantedQos(client, filter);
      if (allowed) assert.equal(qos, 1, `${filter} was refused`);
      else assert.equal(qos, subscriptionFailure, `${filter} was granted`);
    }

    beforeAll(async () => {
      broker = await start();
      admin = await signUpAdmin(broker.service, aclAdminEmail);
      cars.a1 = await provisionCar(`brand_a:${newVin()}`);
      cars.a2 = await provisionCar(`brand_a:${newVin()}`);
      cars.b1 = await provisionCar(`brand_b:fleet-${randomUUID()}`);
      const made = await asAdmin('POST', '/api/v1/admin/connectors', {
        brand: 'brand_a',
        name: `acl-${randomUUID().slice(0, 8)}`,
      });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      connector = {
        username: made.body.mqtt.username,
        password: made.body.mqtt.password,
        clientId: made.body.mqtt.client_id,
      };
      observer = await connect(broker.observer);
      seen = new Inbox(observer);
      for (const suffix of ['status', 'telemetry', 'presence', 'cmd/ack']) {
        await assertSubscription(observer, `cars/+/+/${suffix}`, true);
      }
    });

    afterAll(async () => {
      await Promise.all(open.map((client) => client.endAsync(true).catch(() => {})));
      await broker?.stop();
    });

    test('when a car publishes its own status, telemetry, presence and acks then the service receives each', async () => {
      const car = await connect(cars.a1);
      for (const suffix of ['status', 'telemetry', 'presence', 'cmd/ack']) {
        await assertDelivered(car, topic(cars.a1, suffix));
      }
    });

    test('when a car subscribes to its own cmd then it is granted and receives the commands sent to it', async () => {
      const car = await connect(cars.a1);
      const inbox = new Inbox(car);
      await assertSubscription(car, topic(cars.a1, 'cmd'), true);
      await assertDelivered(observer, topic(cars.a1, 'cmd'), inbox);
    });

    test('when a car publishes under another car, another brand, or a command then nothing is delivered', async () => {
      const sentinel = topic(cars.a1, 'status');
      for (const to of [
        topic(cars.a2, 'status'),
        topic(cars.a2, 'telemetry'),
        topic(cars.a2, 'cmd/ack'),
        topic(cars.b1, 'presence'),
        topic({ brand: 'brand_b', nativeId: cars.a1.nativeId }, 'status'),
      ]) {
        await assertNotDelivered(cars.a1, await connect(cars.a1), to, sentinel);
      }
      // A car's own cmd is the service's to send: a car publishing it would forge a command.
      const car = await connect(cars.a1);
      const inbox = new Inbox(car);
      await assertSubscription(car, topic(cars.a1, 'cmd'), true);
      await assertNotDelivered(cars.a1, car, topic(cars.a1, 'cmd'), sentinel, inbox);
    });

    test("when a car subscribes to another car's cmd, to cars/# or to every car's cmd then the broker answers 128", async () => {
      const car = await connect(cars.a1);
      for (const filter of [
        topic(cars.a2, 'cmd'),
        topic(cars.b1, 'cmd'),
        'cars/#',
        'cars/+/+/cmd',
        'cars/brand_a/+/cmd',
        topic(cars.a2, 'status'),
        '#',
      ]) {
        await assertSubscription(car, filter, false);
      }
    });

    test("when a car signs in with a wrong password, another car's client id, or as no one then it is refused", async () => {
      assert.ok(refusedSignIn.includes((await refusal({ ...cars.a1, password: 'mq_wrong' })) ?? 0));
      assert.ok(refusedSignIn.includes((await refusal({ ...cars.a1, clientId: cars.a2.clientId })) ?? 0));
      assert.ok(
        refusedSignIn.includes((await refusal({ ...cars.a1, username: `brand_a:${newVin()}` })) ?? 0),
      );
      assert.ok(refusedSignIn.includes((await refusal({ ...connector, clientId: cars.a1.clientId })) ?? 0));
    });

    test("when a car's connection drops then its last will on its presence topic is delivered", async () => {
      const payload = randomUUID();
      const arrives = seen.receives(payload);
      const car = await connect(cars.a2, {
        will: { topic: topic(cars.a2, 'presence'), payload: Buffer.from(payload), qos: 1, retain: true },
      });
      car.stream.destroy();
      await arrives;
    });

    test('when a connector publishes for cars of its brand then the service receives it, and for another brand nothing is delivered', async () => {
      const client = await connect(connector);
      await assertDelivered(client, topic(cars.a2, 'status'));
      await assertDelivered(client, topic(cars.a1, 'cmd/ack'));
      // Its cars need not be provisioned here: the maker's cloud speaks for its whole fleet.
      await assertDelivered(client, topic({ brand: 'brand_a', nativeId: newVin() }, 'telemetry'));
      const sentinel = topic(cars.a1, 'status');
      for (const to of [topic(cars.b1, 'status'), topic(cars.b1, 'telemetry'), 'cars/brand_b/x/presence']) {
        await assertNotDelivered(connector, await connect(connector), to, sentinel);
      }
    });

    test("when a connector subscribes to its brand's cmd then it receives commands, and another brand's is refused", async () => {
      const client = await connect(connector);
      const inbox = new Inbox(client);
      await assertSubscription(client, 'cars/brand_a/+/cmd', true);
      await assertDelivered(observer, topic(cars.a2, 'cmd'), inbox);
      for (const filter of ['cars/brand_b/+/cmd', topic(cars.b1, 'cmd'), 'cars/#', 'cars/+/+/cmd']) {
        await assertSubscription(client, filter, false);
      }
    });

    test('when a car’s credential is rotated then the connected car is disconnected, the old password refused and the new one accepted', async () => {
      const car = await provisionCar(`brand_a:${newVin()}`);
      const client = await connect(car);
      const ended = closed(client);
      const rotated = await asAdmin(
        'POST',
        `/api/v1/admin/cars/${encodeURIComponent(car.username)}/credential`,
      );
      assert.equal(rotated.status, 201, JSON.stringify(rotated.body));
      await ended;
      assert.ok(refusedSignIn.includes((await refusal(car)) ?? 0));
      const renewed = await connect({ ...car, password: rotated.body.password });
      await assertDelivered(renewed, topic(car, 'status'));
    });

    test('when an online car’s credential is rotated then its status says offline, though Mosquitto sends no will', async () => {
      const car = await provisionCar(`brand_a:${newVin()}`);
      const deviceId = car.username;
      // The connection's time, which its online and its will share (CarPresence `at`), by a car
      // whose clock agrees with the service's.
      const at = broker.service.clock.clock().toISOString();
      const presence = (state: string) =>
        JSON.stringify({ device_id: deviceId, brand: car.brand, state, at });
      const client = await connect(car, {
        will: {
          topic: topic(car, 'presence'),
          payload: Buffer.from(presence('offline')),
          qos: 1,
          retain: true,
        },
      });
      await client.publishAsync(topic(car, 'presence'), presence('online'), { qos: 1, retain: true });
      const online = async () =>
        (await asAdmin('GET', `/api/v1/cars/${encodeURIComponent(deviceId)}/status`)).body.online;
      await eventually('the car is online', async () => (await online()) === true);
      const rotated = await asAdmin('POST', `/api/v1/admin/cars/${encodeURIComponent(deviceId)}/credential`);
      assert.equal(rotated.status, 201, JSON.stringify(rotated.body));
      await eventually('the car is offline', async () => (await online()) === false);
    });

    test('when a car is decommissioned then the connected car is disconnected and cannot sign in again', async () => {
      const car = await provisionCar(`brand_a:${newVin()}`);
      const client = await connect(car);
      const ended = closed(client);
      const removed = await asAdmin('DELETE', `/api/v1/admin/cars/${encodeURIComponent(car.username)}`);
      assert.equal(removed.status, 204);
      await ended;
      assert.ok(refusedSignIn.includes((await refusal(car)) ?? 0));
    });

    test('when a connector is removed then its connection ends and it cannot sign in again', async () => {
      const name = `gone-${randomUUID().slice(0, 8)}`;
      const made = await asAdmin('POST', '/api/v1/admin/connectors', { brand: 'brand_b', name });
      const gone = { ...made.body.mqtt, clientId: made.body.mqtt.client_id } as SignIn;
      const client = await connect(gone);
      const ended = closed(client);
      assert.equal((await asAdmin('DELETE', `/api/v1/admin/connectors/brand_b/${name}`)).status, 204);
      await ended;
      assert.ok(refusedSignIn.includes((await refusal(gone)) ?? 0));
    });
  });
}
