/**
 * What a broker keeps for a car that comes back with its session (`clean: false`): only what its
 * row of the ACL table lets it receive, on the embedded broker and on Mosquitto alike, and on the
 * embedded broker no more than its queue bound. The attack of issue 24: a car asks, in one
 * SUBSCRIBE, for its own `cmd` (granted) and `#` (refused), goes away, and comes back for what the
 * broker queued meanwhile (another car's pairing code).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { connect as tcpConnect } from 'node:net';
import mqtt, { ErrorWithSubackPacket, type IClientOptions, type MqttClient } from 'mqtt';
import mqttPacket from 'mqtt-packet';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import { type BrokerUnderTest, newVin, type SignIn } from './support/broker-acl.ts';
import { startEmbeddedUnderTest, startMosquittoUnderTest } from './support/brokers.ts';
import { ownerOf } from './support/cars.ts';
import { commandsOf } from './support/commands.ts';
import { call, eventually } from './support/http.ts';
import { sample } from './support/metrics.ts';

const adminEmail = 'sessions-admin@example.com';
const subscriptionFailure = 128;
/** The embedded broker's queue bound in these tests: small, to be reached. */
const queueBound = { messages: 5, bytes: 4096 };

interface Received {
  topic: string;
  payload: string;
}

interface Car extends SignIn {
  brand: string;
  nativeId: string;
}

const cmdTopic = (car: Car) => `cars/${car.brand}/${car.nativeId}/cmd`;

/** The broker's code for each filter of one SUBSCRIBE: the QoS granted, or 128 for a refusal. */
async function grants(client: MqttClient, filters: string[]): Promise<number[]> {
  try {
    const granted = await client.subscribeAsync(Object.fromEntries(filters.map((f) => [f, { qos: 1 }])));
    return granted.map((grant) => grant.qos);
  } catch (error) {
    // mqtt.js rejects a SUBACK that refuses any filter, and keeps the packet.
    if (error instanceof ErrorWithSubackPacket) return error.packet.granted as number[];
    throw error;
  }
}

function startBroker(
  name: string,
  start: () => Promise<BrokerUnderTest>,
  body: (context: {
    broker: () => BrokerUnderTest;
    admin: () => Developer;
    provisionCar: (deviceId: string) => Promise<Car>;
    /** Connects; what arrives is in `inbox` from the first message on, also one sent right after the CONNACK. */
    connect: (who: SignIn, options?: IClientOptions, inbox?: Received[]) => Promise<MqttClient>;
  }) => void,
): void {
  describe(name, () => {
    let broker: BrokerUnderTest;
    let admin: Developer;
    const open: MqttClient[] = [];

    beforeAll(async () => {
      broker = await start();
      admin = await signUpAdmin(broker.service, adminEmail);
    });
    afterAll(async () => {
      await Promise.all(open.map((client) => client.endAsync(true).catch(() => {})));
      await broker?.stop();
    });

    body({
      broker: () => broker,
      admin: () => admin,
      async provisionCar(deviceId) {
        const [brand = '', nativeId = ''] = deviceId.split(':');
        const made = await call(broker.service.url, 'POST', '/api/v1/admin/cars', {
          token: admin.token,
          body: { device_id: deviceId, brand },
        });
        assert.equal(made.status, 201, JSON.stringify(made.body));
        const { username, password, client_id } = made.body.mqtt;
        return { username, password, clientId: client_id, brand, nativeId };
      },
      async connect(who, options = {}, inbox) {
        const client = mqtt.connect(broker.service.mqttUrl, {
          username: who.username,
          password: who.password,
          clientId: who.clientId,
          protocolVersion: 4,
          clean: true,
          reconnectPeriod: 0,
          ...options,
        });
        client.on('error', () => {});
        if (inbox)
          client.on('message', (topic, payload) => inbox.push({ topic, payload: payload.toString() }));
        open.push(client);
        await new Promise<void>((resolve, reject) => {
          client.once('connect', () => resolve());
          client.once('close', () => reject(new Error(`${who.username} could not connect`)));
        });
        return client;
      },
    });
  });
}

type Context = Parameters<Parameters<typeof startBroker>[2]>[0];

/** The attack of issue 24, end to end: the same on every broker. */
function attackTests({ broker, admin, provisionCar, connect }: Context): void {
  test("when a car subscribes to its own cmd and # in one SUBSCRIBE, goes away, and another brand's car is sent its pairing code, then on its return it receives only its own commands, and no code it saw pairs the other car", async () => {
    const service = broker().service;
    const commands = commandsOf(service.url);
    const attacker = await provisionCar(`brand_a:${newVin()}`);
    const victim = await provisionCar(`brand_b:victim-${randomUUID()}`);
    const attackerAccount = await signUpDeveloper(service.url);
    const ownerToBe = await signUpDeveloper(service.url);

    const first = await connect(attacker, { clean: false });
    assert.deepEqual(await grants(first, [cmdTopic(attacker), '#']), [1, subscriptionFailure]);
    await first.endAsync();

    // While the attacker is away the victim's owner-to-be asks for its code (QoS 1 on its cmd),
    // and then the attacker's account for its own car's: the broker holds that one for it.
    const victimCode = await commands.pair(ownerToBe.token, victim.username);
    assert.equal(victimCode.status, 202, JSON.stringify(victimCode.body));
    await commands.until(admin().token, victim.username, victimCode.body.command_id, 'sent');
    const ownCode = await commands.pair(attackerAccount.token, attacker.username);
    assert.equal(ownCode.status, 202, JSON.stringify(ownCode.body));
    await commands.until(admin().token, attacker.username, ownCode.body.command_id, 'sent');

    const received: Received[] = [];
    const back = await connect(attacker, { clean: false }, received);
    await eventually('the attacker receives its own pairing code, queued after the victim’s', () =>
      received.some(({ payload }) => payload.includes(ownCode.body.command_id)),
    );
    // Sent while it is back: another car's command, then one of its own behind it.
    const observer = await connect(broker().observer);
    const liveForVictim = randomUUID();
    const liveForAttacker = randomUUID();
    await observer.publishAsync(cmdTopic(victim), liveForVictim, { qos: 1 });
    await observer.publishAsync(cmdTopic(attacker), liveForAttacker, { qos: 1 });
    await eventually('the attacker receives the command sent to it', () =>
      received.some(({ payload }) => payload === liveForAttacker),
    );

    assert.deepEqual(
      received.filter(({ topic }) => topic !== cmdTopic(attacker)),
      [],
      'only its own cmd reaches the attacker',
    );
    assert.ok(!received.some(({ payload }) => payload.includes(victimCode.body.command_id)));
    assert.ok(!received.some(({ payload }) => payload === liveForVictim));

    const codesSeen = received.flatMap(({ payload }) => {
      try {
        const command = JSON.parse(payload);
        return command.name === 'pairing.show_code' ? [command.args.code as string] : [];
      } catch {
        return [];
      }
    });
    assert.ok(codesSeen.length > 0, 'the attacker saw its own code');
    for (const code of codesSeen) {
      const tried = await commands.pair(attackerAccount.token, victim.username, { code });
      assert.equal(tried.status, 422, JSON.stringify(tried.body));
      assert.equal(tried.body.code, 'wrong_pairing_code');
    }
    assert.equal(await ownerOf(service, victim.username), null, 'the victim’s car is nobody’s yet');
    await back.endAsync();
  });
}

/** What the embedded broker queues for a car that is away, with a bound of 5 messages and 4,096 bytes. */
function queueBoundTests({ broker, provisionCar, connect }: Context): void {
  const dropped = async (limit: string) => {
    const metrics = String((await call(broker().service.metricsUrl, 'GET', '')).body);
    return sample(metrics, 'svc_mqtt_queue_dropped_total', { limit });
  };

  /** A car with a kept session subscribed to its cmd, then gone. */
  async function carAway(): Promise<Car> {
    const car = await provisionCar(`brand_a:${newVin()}`);
    const client = await connect(car, { clean: false });
    assert.deepEqual(await grants(client, [cmdTopic(car)]), [1]);
    await client.endAsync();
    return car;
  }

  /** Comes back and collects what arrives until a command sent now, which comes after the queue. */
  async function comeBack(car: Car): Promise<string[]> {
    const received: Received[] = [];
    const client = await connect(car, { clean: false }, received);
    const observer = await connect(broker().observer);
    const sentinel = randomUUID();
    await observer.publishAsync(cmdTopic(car), sentinel, { qos: 1 });
    await eventually('the command sent on its return arrives', () =>
      received.some(({ payload }) => payload === sentinel),
    );
    await client.endAsync();
    await observer.endAsync();
    return received.map(({ payload }) => payload).filter((payload) => payload !== sentinel);
  }

  test('when 8 commands are sent to a car away with a bound of 5 then it receives the first 5 on its return, the other 3 are counted as dropped, and the broker goes on', async () => {
    const car = await carAway();
    const before = await dropped('messages');
    const observer = await connect(broker().observer);
    const sent = Array.from(
      { length: queueBound.messages + 3 },
      (_, i) => `command ${i + 1} ${randomUUID()}`,
    );
    for (const payload of sent) await observer.publishAsync(cmdTopic(car), payload, { qos: 1 });
    await observer.endAsync();

    assert.equal(await dropped('messages'), before + 3);
    assert.deepEqual(await comeBack(car), sent.slice(0, queueBound.messages));
    // Its queue is free again: the next time it is away, commands wait for it.
    const client = await connect(car, { clean: false });
    await client.endAsync();
    const later = await connect(broker().observer);
    await later.publishAsync(cmdTopic(car), 'after the drops', { qos: 1 });
    await later.endAsync();
    assert.deepEqual(await comeBack(car), ['after the drops']);
  });

  test('when commands sent to a car away add up to more than the bytes bound then those beyond it are dropped and counted', async () => {
    const car = await carAway();
    const before = await dropped('bytes');
    const observer = await connect(broker().observer);
    // 1,500 bytes each (and the topic): two fit in 4,096, the third would not.
    const sent = ['a', 'b', 'c'].map((letter) => letter.repeat(1500));
    for (const payload of sent) await observer.publishAsync(cmdTopic(car), payload, { qos: 1 });
    await observer.endAsync();

    assert.equal(await dropped('bytes'), before + 1);
    assert.deepEqual(await comeBack(car), sent.slice(0, 2));
  });

  test('when a connected car that never acknowledges is sent more than its bound then it gets each command once and stays connected', async () => {
    const car = await provisionCar(`brand_a:${newVin()}`);
    // A car of bare packets: it reads every PUBLISH and answers none with a PUBACK.
    const { hostname, port } = new URL(broker().service.mqttUrl);
    const socket = tcpConnect(Number(port), hostname);
    let closed = false;
    socket.on('close', () => {
      closed = true;
    });
    socket.on('error', () => {});
    const packets: mqttPacket.Packet[] = [];
    const parser = mqttPacket.parser({ protocolVersion: 4 });
    parser.on('packet', (packet) => packets.push(packet));
    socket.on('data', (chunk) => parser.parse(chunk));
    const send = (packet: mqttPacket.Packet) => socket.write(mqttPacket.generate(packet));
    send({
      cmd: 'connect',
      protocolId: 'MQTT',
      protocolVersion: 4,
      clean: false,
      clientId: car.clientId,
      username: car.username,
      password: Buffer.from(car.password),
      keepalive: 0,
    });
    send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: cmdTopic(car), qos: 1 }] });
    await eventually('the car is subscribed', () => packets.some((packet) => packet.cmd === 'suback'));
    const received = () =>
      packets.flatMap((packet) => (packet.cmd === 'publish' ? [packet.payload.toString()] : []));

    const before = await dropped('messages');
    const observer = await connect(broker().observer);
    const sent = Array.from({ length: queueBound.messages + 3 }, (_, i) => `unacknowledged ${i + 1}`);
    for (const payload of sent) await observer.publishAsync(cmdTopic(car), payload, { qos: 1 });
    await eventually('the car has every command', () => received().length >= sent.length);
    await observer.endAsync();

    assert.deepEqual(received(), sent);
    assert.equal(await dropped('messages'), before + 3);
    assert.ok(!closed, 'the car is still connected');
    socket.destroy();
  });
}

startBroker(
  'a car that keeps its session, on the embedded broker',
  () =>
    startEmbeddedUnderTest({
      SVC_ADMIN_EMAILS: adminEmail,
      MQTT_MAX_QUEUED_MESSAGES: String(queueBound.messages),
      MQTT_MAX_QUEUED_BYTES: String(queueBound.bytes),
    }),
  (context) => {
    attackTests(context);
    queueBoundTests(context);
  },
);

startBroker(
  'a car that keeps its session, on Mosquitto with dynamic security',
  () => startMosquittoUnderTest({ SVC_ADMIN_EMAILS: adminEmail }),
  attackTests,
);
