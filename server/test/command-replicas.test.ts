/**
 * Two replicas of the service on one Postgres database and one Mosquitto, both publishing from
 * the outbox and both reading acknowledgements (shared subscriptions): every command reaches
 * `completed`, and each move of each command is made, and counted, exactly once across them.
 */
import assert from 'node:assert/strict';
import { type CarCredential, provisionCars } from '@svc/car-simulator';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin } from './support/accounts.ts';
import { commandsOf, startWatchedSimulator, type WatchedSimulator } from './support/commands.ts';
import { call, eventually } from './support/http.ts';
import { sample } from './support/metrics.ts';
import { startMosquitto, type TestMosquitto } from './support/mosquitto.ts';
import { startTestService, type TestService } from './support/service.ts';
import { openTestStore, type TestStore } from './support/store.ts';

// Two services on one PGlite data folder cannot be: the folder is locked by the first.
const needsPostgres = process.env.DATABASE_URL
  ? false
  : 'needs Postgres (set DATABASE_URL): two replicas cannot share a PGlite data folder';

const adminEmail = 'replicas-admin@example.com';
const carCount = 6;
const commandsPerCar = 4;

describe.skipIf(needsPostgres)(
  `commands from two service replicas on one database${needsPostgres ? ` (${needsPostgres})` : ''}`,
  () => {
    let mosquitto: TestMosquitto;
    let store: TestStore;
    const replicas: TestService[] = [];
    let admin: Developer;
    let simulator: WatchedSimulator | undefined;

    beforeAll(async () => {
      mosquitto = await startMosquitto();
      store = await openTestStore();
      const env = {
        SVC_ADMIN_EMAILS: adminEmail,
        MQTT_URL: mosquitto.url,
        MQTT_USERNAME: mosquitto.admin.username,
        MQTT_PASSWORD: mosquitto.admin.password,
        // Often, so that each replica's sweep also finds the other's commands queued.
        SVC_COMMAND_SWEEP: '1s',
      };
      // Each replica its own name, so its own broker session (docs/operating.md, "Replicas and broker restarts").
      for (let i = 0; i < 2; i += 1) {
        replicas.push(
          await startTestService({ ...env, SVC_REPLICA_ID: `replica-${i + 1}` }, { store, clockRuns: true }),
        );
      }
      // The code the last replica printed is the live one: each start issues a new one.
      admin = await signUpAdmin(replicas[1] as TestService, adminEmail);
    });
    afterAll(async () => {
      await simulator?.stop();
      for (const replica of replicas) await replica.stop();
      await store?.close();
      await mosquitto?.stop();
    });

    test('when commands are sent through both replicas then every one completes, and each state is counted once in all', async () => {
      const [first, second] = replicas as [TestService, TestService];
      const cars: CarCredential[] = await provisionCars({
        apiUrl: first.url,
        token: admin.token,
        count: carCount,
        brand: 'brand_a',
      });
      simulator = await startWatchedSimulator(mosquitto.url, cars);

      const made: { deviceId: string; commandId: string }[] = [];
      await Promise.all(
        cars.map(async (car, index) => {
          for (let i = 0; i < commandsPerCar; i += 1) {
            const through = (index + i) % 2 === 0 ? first : second;
            const name = i % 2 === 0 ? 'doors.lock' : 'doors.unlock';
            const sent = await commandsOf(through.url).send(admin.token, car.deviceId, { name });
            assert.equal(sent.status, 202, JSON.stringify(sent.body));
            made.push({ deviceId: car.deviceId, commandId: sent.body.command_id });
          }
        }),
      );
      for (const { deviceId, commandId } of made) {
        await commandsOf(second.url).until(admin.token, deviceId, commandId, 'completed', 30_000);
      }

      let scrapes: string[] = [];
      const counted = (state: string) =>
        scrapes
          .flatMap((text) =>
            ['doors.lock', 'doors.unlock'].map((name) => sample(text, 'svc_commands_total', { name, state })),
          )
          .reduce((sum, count) => sum + count, 0);
      const total = carCount * commandsPerCar;
      // The last move is counted a moment after a reader may see it stored.
      await eventually('every completion is counted', async () => {
        scrapes = await Promise.all(
          replicas.map(async (replica) => String((await call(replica.metricsUrl, 'GET', '')).body)),
        );
        return counted('completed') >= total;
      });
      assert.equal(counted('queued'), total, 'queued, over both replicas');
      assert.equal(counted('completed'), total, 'completed, over both replicas');
      // A command may skip these: the car's `accepted` can overtake the PUBACK's UPDATE, and with
      // the acknowledgements shared between replicas `completed` can overtake `accepted`. Never twice.
      for (const state of ['sent', 'accepted']) {
        assert.ok(counted(state) <= total && counted(state) > 0, `${state}: ${counted(state)} of ${total}`);
      }
    });
  },
);
