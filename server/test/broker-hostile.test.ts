/**
 * What an attacker can send the embedded broker, which is open to anyone before they sign in:
 * packets announcing more than the broker takes, payloads built to choke a JSON reader, and a
 * flood of sign-ins with wrong passwords. Each is refused and counted; the service stays up and
 * cars keep reporting.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Socket, connect as tcpConnect } from 'node:net';
import mqtt, { type MqttClient } from 'mqtt';
import mqttPacket from 'mqtt-packet';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { guardPacketSize, maxPacketBytes, PacketSizeReader } from '../src/broker/packet-size-guard.ts';
import { readCarMessage } from '../src/mqtt/car-message.ts';
import { type Developer, signUpAdmin } from './support/accounts.ts';
import { deviceIds } from './support/cars.ts';
import { call, eventually } from './support/http.ts';
import { sample, scrape } from './support/metrics.ts';
import { startTestService, type TestService } from './support/service.ts';

const adminEmail = 'hostile-admin@example.com';
const at = '2026-11-21T09:59:00.000Z';
const newDeviceId = deviceIds('hostile');

const statusReport = (deviceId: string, state: unknown = { ignition: false }) => ({
  device_id: deviceId,
  brand: 'brand_b',
  reported_at: at,
  host_version: '2.14.0',
  state,
  installed_apps: [],
});

/** Sends `bytes` over a fresh connection and resolves once the broker closes it. */
function sendRaw(mqttUrl: string, bytes: Buffer): Promise<void> {
  const { hostname, port } = new URL(mqttUrl);
  return new Promise((resolve) => {
    const socket = tcpConnect(Number(port), hostname, () => socket.write(bytes));
    socket.on('error', () => {});
    socket.on('close', () => resolve());
  });
}

describe('a hostile client on the embedded broker', () => {
  let service: TestService;
  let admin: Developer;
  const open: MqttClient[] = [];

  const refusals = async (reason: string) =>
    sample(await scrape(service), 'svc_mqtt_connections_refused_total', { reason });
  const readStatus = (deviceId: string) =>
    call(service.url, 'GET', `/api/v1/cars/${encodeURIComponent(deviceId)}/status`, { token: admin.token });

  async function provision(): Promise<{ deviceId: string; password: string }> {
    const deviceId = newDeviceId();
    const made = await call(service.url, 'POST', '/api/v1/admin/cars', {
      token: admin.token,
      body: { device_id: deviceId, brand: 'brand_b' },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    return { deviceId, password: made.body.mqtt.password };
  }

  async function signIn(car: { deviceId: string; password: string }): Promise<MqttClient> {
    const client = await mqtt.connectAsync(service.mqttUrl, {
      clientId: car.deviceId,
      username: car.deviceId,
      password: car.password,
      reconnectPeriod: 0,
    });
    client.on('error', () => {});
    open.push(client);
    return client;
  }

  const publishStatus = (client: MqttClient, deviceId: string, payload: string | Buffer) =>
    client.publishAsync(`cars/brand_b/${deviceId.slice('brand_b:'.length)}/status`, payload, { qos: 1 });

  /** A car that signs in, reports, and is seen: the broker and the bridge still work. */
  async function assertCarsStillReport(): Promise<void> {
    const car = await provision();
    const client = await signIn(car);
    await publishStatus(client, car.deviceId, JSON.stringify(statusReport(car.deviceId)));
    await eventually(
      'the status of a car that signs in now is stored',
      async () => (await readStatus(car.deviceId)).body.reported_at === at,
    );
    await client.endAsync();
  }

  beforeAll(async () => {
    service = await startTestService({ SVC_ADMIN_EMAILS: adminEmail });
    admin = await signUpAdmin(service, adminEmail);
  });
  afterAll(async () => {
    for (const client of open) client.end(true);
    await service?.stop();
  });

  test('when a client announces a 256 MB packet before signing in then the broker closes the connection, counts it and logs the address', async () => {
    const before = await refusals('packet_too_large');
    const from = service.logs.length;
    // A CONNECT whose remaining length is the largest MQTT allows, and the start of its body.
    await sendRaw(
      service.mqttUrl,
      Buffer.concat([Buffer.from([0x10, 0xff, 0xff, 0xff, 0x7f]), Buffer.alloc(1024)]),
    );

    assert.equal(await refusals('packet_too_large'), before + 1);
    const logged = service.logs
      .slice(from)
      .map((line) => JSON.parse(line))
      .find((line) => line.reason === 'packet_too_large');
    assert.equal(logged?.remote, '127.0.0.1');
    assert.equal(logged?.limit_bytes, maxPacketBytes);
    await assertCarsStillReport();
  });

  test('when a signed-in car publishes more than the limit then its connection is closed and nothing is stored', async () => {
    const car = await provision();
    const client = await signIn(car);
    const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
    const huge = JSON.stringify(statusReport(car.deviceId, { note: 'x'.repeat(maxPacketBytes) }));
    void publishStatus(client, car.deviceId, huge).catch(() => {});
    await closed;

    assert.equal((await readStatus(car.deviceId)).body.reported_at, null);
    await assertCarsStillReport();
  });

  test('when a car publishes a status nested thousands deep then it is dropped as invalid_payload, and its next status is stored', async () => {
    const car = await provision();
    const client = await signIn(car);
    const before = sample(await scrape(service), 'svc_mqtt_dropped_total', { reason: 'invalid_payload' });
    const depth = 10_000;
    const deep = JSON.stringify(statusReport(car.deviceId, { nested: 0 })).replace(
      '"nested":0',
      `"nested":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`,
    );
    assert.ok(Buffer.byteLength(deep) < maxPacketBytes, 'small enough for the broker to take');
    await publishStatus(client, car.deviceId, deep);
    await eventually(
      'the deep status is dropped',
      async () =>
        sample(await scrape(service), 'svc_mqtt_dropped_total', { reason: 'invalid_payload' }) === before + 1,
    );
    assert.equal((await readStatus(car.deviceId)).body.reported_at, null);

    await publishStatus(client, car.deviceId, JSON.stringify(statusReport(car.deviceId)));
    await eventually(
      'the next status is stored',
      async () => (await readStatus(car.deviceId)).body.reported_at === at,
    );
    await client.endAsync();
  });

  test('when hundreds of sign-ins with wrong passwords arrive at once then each is refused and counted, and the service stays up', async () => {
    const victim = await provision();
    const before = await refusals('credential');
    const attempts = [
      ...Array.from({ length: 100 }, () => ({ username: victim.deviceId, clientId: victim.deviceId })),
      ...Array.from({ length: 100 }, () => {
        const deviceId = newDeviceId();
        return { username: deviceId, clientId: deviceId };
      }),
      ...Array.from({ length: 100 }, (_, i) => ({ username: `not a car ${i}`, clientId: `guess-${i}` })),
    ];
    const codes: (number | undefined)[] = [];
    for (let start = 0; start < attempts.length; start += 50) {
      const wave = attempts.slice(start, start + 50).map(async ({ username, clientId }) => {
        try {
          const client = await mqtt.connectAsync(service.mqttUrl, {
            username,
            clientId,
            password: 'mq_a-guess',
            reconnectPeriod: 0,
          });
          client.end(true);
          return undefined;
        } catch (error) {
          return (error as { code?: number }).code;
        }
      });
      codes.push(...(await Promise.all(wave)));
    }
    assert.deepEqual(new Set(codes), new Set([4]), 'every attempt refused: bad user name or password');
    assert.equal(await refusals('credential'), before + attempts.length);

    assert.equal((await call(service.url, 'GET', '/readyz')).status, 200);
    await assertCarsStillReport();
  });
});

describe('a payload over the limit that reaches the bridge (a broker without a limit)', () => {
  test('when it is read then it is dropped as too_large, before anything parses it', () => {
    const deviceId = 'brand_b:hostile-big';
    const payload = Buffer.from(JSON.stringify(statusReport(deviceId, { note: 'x'.repeat(maxPacketBytes) })));
    const read = readCarMessage('cars/brand_b/hostile-big/status', payload);
    assert.deepEqual(read, { ok: false, reason: 'too_large', suffix: 'status', deviceId });
  });
});

describe('the packet size reader', () => {
  /** A packet of `type` with `bodyBytes` of body, its remaining length encoded as MQTT does. */
  function packet(type: number, bodyBytes: number): Buffer {
    const length: number[] = [];
    let left = bodyBytes;
    do {
      let byte = left % 128;
      left = Math.floor(left / 128);
      if (left > 0) byte |= 0x80;
      length.push(byte);
    } while (left > 0);
    return Buffer.concat([Buffer.from([type, ...length]), Buffer.alloc(bodyBytes, 0x61)]);
  }

  test('when packets within the limit come whole, several at once or a byte at a time then none is refused', () => {
    const stream = Buffer.concat([
      packet(0x10, 40),
      packet(0xc0, 0),
      packet(0x32, 127),
      packet(0x32, 128),
      packet(0x32, maxPacketBytes - 4),
    ]);
    assert.equal(new PacketSizeReader(maxPacketBytes).read(stream), undefined);
    const byByte = new PacketSizeReader(maxPacketBytes);
    for (const byte of stream) assert.equal(byByte.read(Buffer.from([byte])), undefined);
  });

  test('when a packet announces one byte more than the limit then it is refused, before its body', () => {
    const reader = new PacketSizeReader(maxPacketBytes);
    assert.equal(reader.read(packet(0xc0, 0)), undefined);
    const tooLarge = packet(0x32, maxPacketBytes - 3);
    assert.deepEqual(reader.read(tooLarge.subarray(0, 4)), {
      reason: 'packet_too_large',
      announcedBytes: maxPacketBytes + 1,
    });
  });

  test('when a remaining length runs over four bytes then the packet is malformed', () => {
    const reader = new PacketSizeReader(Number.MAX_SAFE_INTEGER);
    assert.deepEqual(reader.read(Buffer.from([0x30, 0xff, 0xff, 0xff, 0xff])), {
      reason: 'malformed_packet',
    });
  });
});

describe('the guarded connection', () => {
  test('when the broker writes a packet in pieces then the connection sends it whole, in one write', async () => {
    const server = createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as { port: number };
    const client = tcpConnect(port, '127.0.0.1');
    const [socket] = (await once(server, 'connection')) as [Socket];
    try {
      const guarded = guardPacketSize(socket, maxPacketBytes, () => assert.fail('nothing is refused'));
      let writes = 0;
      const write = socket.write.bind(socket);
      socket.write = ((...args: Parameters<Socket['write']>) => {
        writes += 1;
        return write(...args);
      }) as Socket['write'];
      const publish = {
        cmd: 'publish' as const,
        topic: 'cars/brand_a/VIN00000000000001/cmd',
        payload: Buffer.from(JSON.stringify({ command_id: 'c1', name: 'doors.lock' })),
        qos: 1 as const,
        messageId: 7,
        retain: false,
        dup: false,
      };
      const expected = mqttPacket.generate(publish);
      const received: Buffer[] = [];
      client.on('data', (chunk: Buffer) => received.push(chunk));
      // As aedes writes: mqtt-packet corks the stream and writes the header, topic and payload.
      assert.ok(mqttPacket.writeToStream(publish, guarded));
      await eventually('the whole packet', () => Buffer.concat(received).length >= expected.length);
      assert.deepEqual(Buffer.concat(received), expected);
      assert.equal(writes, 1);
    } finally {
      client.destroy();
      socket.destroy();
      server.close();
    }
  });
});
