/**
 * Two replicas of the service on one Postgres database and one Mosquitto: their bridges share
 * the subscriptions (`$share/svc/…`, MQTT 5), so the broker hands each message to one of them,
 * and every message a car sends is stored once.
 */
import assert from 'node:assert/strict';
import { type CarCredential, type Simulator, startSimulator } from '@svc/car-simulator';
import mqtt, { type MqttClient } from 'mqtt';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { carTopicFilter, carTopicQos, parseCarTopic } from '../../generated/mqtt.ts';
import { type Developer, signUpAdmin } from './support/accounts.ts';
import { call, eventually } from './support/http.ts';
import { sample } from './support/metrics.ts';
import { startMosquitto, type TestMosquitto } from './support/mosquitto.ts';
import { startTestService, type TestService } from './support/service.ts';
import { openTestStore, type TestStore } from './support/store.ts';

// Two services on one PGlite data folder cannot be: the folder is locked by the first.
const needsPostgres = process.env.DATABASE_URL
  ? false
  : 'needs Postgres (set DATABASE_URL): two replicas cannot share a PGlite data folder';

const carCount = 8;
const adminEmail = 'root@example.com';

/** What an observer with its own (unshared) subscriptions saw the cars send, per car. */
interface Sent {
  status: Map<string, string[]>;
  telemetry: Map<string, number>;
}

const total = (counts: Iterable<number>) => [...counts].reduce((sum, count) => sum + count, 0);

describe.skipIf(needsPostgres)(
  `two service replicas on one database${needsPostgres ? ` (${needsPostgres})` : ''}`,
  () => {
    let mosquitto: TestMosquitto;
    let store: TestStore;
    const replicas: TestService[] = [];
    let admin: Developer;
    let observer: MqttClient;
    const sent: Sent = { status: new Map(), telemetry: new Map() };

    beforeAll(async () => {
      mosquitto = await startMosquitto();
      store = await openTestStore();
      const env = {
        SVC_ADMIN_EMAILS: adminEmail,
        MQTT_URL: mosquitto.url,
        MQTT_USERNAME: mosquitto.admin.username,
        MQTT_PASSWORD: mosquitto.admin.password,
      };
      for (let i = 0; i < 2; i += 1) {
        // Each replica its own name, so its own broker session (docs/operating.md, "Replicas and broker restarts").
        replicas.push(
          await startTestService({ ...env, SVC_REPLICA_ID: `replica-${i + 1}` }, { store, clockRuns: true }),
        );
      }
      // The code the last replica printed is the live one: each start issues a new one.
      admin = await signUpAdmin(replicas[1] as TestService, adminEmail);
      // Counts what the cars send, beside the replicas: a plain subscription gets every message.
      observer = await mqtt.connectAsync(mosquitto.url, {
        ...mosquitto.admin,
        clientId: `${mosquitto.admin.username}/replicas-observer`,
        protocolVersion: 5,
      });
      observer.on('message', (topic, payload) => {
        const parsed = parseCarTopic(topic);
        if (!parsed) return;
        const deviceId = `${parsed.brand}:${parsed.nativeId}`;
        if (parsed.suffix === 'status') {
          const reports = sent.status.get(deviceId) ?? [];
          reports.push(JSON.parse(payload.toString()).reported_at);
          sent.status.set(deviceId, reports);
        } else if (parsed.suffix === 'telemetry') {
          sent.telemetry.set(deviceId, (sent.telemetry.get(deviceId) ?? 0) + 1);
        }
      });
      await observer.subscribeAsync({
        [carTopicFilter('status')]: { qos: carTopicQos.status },
        [carTopicFilter('telemetry')]: { qos: carTopicQos.telemetry },
      });
    });
    afterAll(async () => {
      await observer?.endAsync();
      for (const replica of replicas) await replica.stop();
      await store?.close();
      await mosquitto?.stop();
    });

    test('when cars report through both replicas then every message is stored exactly once, and both took a share', async () => {
      const first = replicas[0] as TestService;
      const cars: CarCredential[] = [];
      for (let i = 0; i < carCount; i += 1) {
        const deviceId = `brand_b:replicas-${process.pid}-${i}`;
        const made = await call(first.url, 'POST', '/api/v1/admin/cars', {
          token: admin.token,
          body: { device_id: deviceId, brand: 'brand_b' },
        });
        assert.equal(made.status, 201, JSON.stringify(made.body));
        cars.push({ deviceId, password: made.body.mqtt.password as string });
      }

      let simulator: Simulator | undefined = await startSimulator({
        mqttUrl: mosquitto.url,
        cars,
        statusEveryMs: 100,
        telemetryEveryMs: 40,
        output: { write: () => true },
        warnings: { write: () => true },
      });
      try {
        await eventually('each car sent 10 status reports', () =>
          cars.every((car) => (sent.status.get(car.deviceId)?.length ?? 0) >= 10),
        );
        await simulator.stop();
        simulator = undefined;
      } finally {
        await simulator?.stop();
      }

      // Counted when asked: the observer, like the replicas, may still be receiving the last
      // messages the cars sent before they stopped.
      const sentStatus = () => total([...sent.status.values()].map((reports) => reports.length));
      const sentTelemetry = () => total(sent.telemetry.values());
      // Taken: stored, or older by the car's own time than the report kept (a replica's connections
      // may take one car's reports out of order, ADR 0054), which changes nothing and is counted so.
      const storedStatus = async () => {
        const scrapes = await Promise.all(replicas.map((replica) => call(replica.metricsUrl, 'GET', '')));
        return scrapes.map((scrape) =>
          ['stored', 'ignored']
            .map((outcome) =>
              sample(String(scrape.body), 'svc_mqtt_messages_total', { suffix: 'status', outcome }),
            )
            .reduce((sum, count) => sum + count, 0),
        );
      };
      const telemetryRows = async () =>
        Number((await store.db('car_telemetry').count<{ count: string }>('* as count').first())?.count);
      await eventually(
        'the replicas stored what the cars sent',
        async () => total(await storedStatus()) >= sentStatus() && (await telemetryRows()) >= sentTelemetry(),
      );
      // Nothing arrives late to be counted twice: a QoS 1 redelivery would show here.
      await new Promise((resolve) => setTimeout(resolve, 500));

      const perReplica = await storedStatus();
      assert.equal(total(perReplica), sentStatus(), `status stored per replica: ${perReplica.join(', ')}`);
      assert.equal(await telemetryRows(), sentTelemetry());
      for (const car of cars) {
        const fixes = await store.db('car_telemetry').where({ device_id: car.deviceId });
        assert.equal(fixes.length, sent.telemetry.get(car.deviceId), `telemetry of ${car.deviceId}`);
        const distinct = new Set(fixes.map((fix) => new Date(fix.recorded_at).toISOString()));
        assert.equal(distinct.size, fixes.length, `no fix of ${car.deviceId} stored twice`);
        const report = await store.db('car_status_reports').where({ device_id: car.deviceId }).first();
        assert.equal(
          new Date(report.reported_at).toISOString(),
          sent.status.get(car.deviceId)?.toSorted().at(-1),
          `the status kept for ${car.deviceId} is the newest it sent`,
        );
      }
      // Mosquitto hands a shared subscription's messages round: each replica took its part.
      for (const [index, replica] of replicas.entries()) {
        const metrics = String((await call(replica.metricsUrl, 'GET', '')).body);
        for (const suffix of ['status', 'telemetry']) {
          assert.ok(
            sample(metrics, 'svc_mqtt_messages_total', { suffix, outcome: 'stored' }) > 0,
            `replica ${index + 1} stored some ${suffix}`,
          );
        }
      }
    });
  },
);
