/**
 * Cars that stream what the service must never lose, for restart tests: each publishes status
 * reports without pause and says `online` now and then, at QoS 1, and acknowledges every command
 * it gets (`accepted`, then `completed`). What the broker acknowledged (PUBACK) is kept per car:
 * that is what the car handed over, and what the service must store. Every report and presence
 * carries a time of its own, so that each can be found in the store (see `recordCarWrites`).
 */
import mqtt, { type MqttClient } from 'mqtt';
import { type CarCommand, carTopic, carTopicQos, carTopicRetain } from '../../../generated/mqtt.ts';
import type { TestStore } from './store.ts';

export interface StreamingCar {
  deviceId: string;
  /** Each status and presence the broker acknowledged, in the order the car sent them (one at a time). */
  handed: { suffix: 'status' | 'presence'; at: string }[];
  /** How many statuses the broker acknowledged. */
  readonly statuses: number;
  /** Ids of the commands it acknowledged as completed (the broker took the acknowledgement). */
  completed: Set<string>;
}

export interface StreamingFleet {
  cars: StreamingCar[];
  /** Stops publishing, waits for what is under way, and disconnects. */
  stop(): Promise<void>;
}

/** Times a few minutes back, one millisecond apart: distinct, and never in the car's future. */
function timeline(): () => string {
  let next = Date.now() - 10 * 60_000;
  return () => {
    next += 1;
    return new Date(next).toISOString();
  };
}

export async function streamCars(
  mqttUrl: string,
  credentials: { deviceId: string; password: string }[],
  options: { statusEveryMs?: number } = {},
): Promise<StreamingFleet> {
  const statusEveryMs = options.statusEveryMs ?? 50;
  let running = true;
  const clients: MqttClient[] = [];
  const loops: Promise<void>[] = [];
  const pending = new Set<Promise<unknown>>();
  const track = (work: Promise<unknown>) => {
    const settled = work.catch(() => {}).finally(() => pending.delete(settled));
    pending.add(settled);
  };
  const cars: StreamingCar[] = [];
  for (const credential of credentials) {
    const { deviceId } = credential;
    const colon = deviceId.indexOf(':');
    const brand = deviceId.slice(0, colon);
    const nativeId = deviceId.slice(colon + 1);
    const topic = (suffix: Parameters<typeof carTopic>[2]) => carTopic(brand, nativeId, suffix);
    const handed: StreamingCar['handed'] = [];
    const car: StreamingCar = {
      deviceId,
      handed,
      get statuses() {
        return handed.filter((message) => message.suffix === 'status').length;
      },
      completed: new Set(),
    };
    const times = timeline();
    const client = await mqtt.connectAsync(mqttUrl, {
      clientId: deviceId,
      username: deviceId,
      password: credential.password,
      clean: true,
      protocolVersion: 4,
      reconnectPeriod: 100,
    });
    clients.push(client);
    // A broker restart cuts the connection: mqtt.js reconnects, and what waits is sent again.
    client.on('error', () => {});
    const publish = (suffix: 'status' | 'presence' | 'cmd/ack', payload: object) =>
      client.publishAsync(topic(suffix), JSON.stringify(payload), {
        qos: carTopicQos[suffix],
        retain: carTopicRetain[suffix],
      });
    /** Says `online` before its next status: one message at a time, so each is placed in `handed`. */
    let announce = true;
    const ack = (command: CarCommand, outcome: 'accepted' | 'completed') =>
      publish('cmd/ack', {
        command_id: command.command_id,
        device_id: deviceId,
        brand,
        outcome,
        at: new Date().toISOString(),
      });
    // A clean session: mqtt.js subscribes again on reconnecting, then the car says it is back.
    client.on('connect', () => {
      announce = true;
    });
    client.on('message', (_topic, payload) => {
      const command = JSON.parse(payload.toString('utf8')) as CarCommand;
      track(
        ack(command, 'accepted')
          .then(() => ack(command, 'completed'))
          .then(() => car.completed.add(command.command_id)),
      );
    });
    await client.subscribeAsync(topic('cmd'), { qos: carTopicQos.cmd });
    cars.push(car);
    loops.push(
      (async () => {
        for (let sent = 0; running; sent += 1) {
          // Now and then as well: a car that says `online` gets again the commands it has not
          // finished (command-outbox.ts), as after a reconnection.
          if (announce || sent % 10 === 9) {
            announce = false;
            const at = times();
            await publish('presence', { device_id: deviceId, brand, state: 'online', at }).then(
              () => handed.push({ suffix: 'presence', at }),
              () => {},
            );
          }
          const reportedAt = times();
          const report = {
            device_id: deviceId,
            brand,
            reported_at: reportedAt,
            host_version: '2.14.0',
            state: { ignition: sent % 2 === 0, doors_locked: true },
            installed_apps: [],
          };
          // One at a time: while the broker is away the car waits, as a car's queue would.
          await publish('status', report).then(
            () => handed.push({ suffix: 'status', at: reportedAt }),
            () => {},
          );
          await new Promise((resolve) => setTimeout(resolve, statusEveryMs));
        }
      })(),
    );
  }
  return {
    cars,
    async stop() {
      running = false;
      await Promise.all(loops);
      await Promise.all([...pending]);
      await Promise.all(clients.map((client) => client.endAsync()));
    },
  };
}

/** What the service wrote for the cars, each write as it was asked for (see recordCarWrites). */
export interface CarWrites {
  /** `reported_at` of each status written, per car. */
  statuses(): Promise<Map<string, Set<string>>>;
  /** `at` of each presence written, per car. */
  presences(): Promise<Map<string, Set<string>>>;
}

/**
 * Records every status and presence the service writes, as it writes it: a trigger before each
 * row the service's upserts propose (it fires for an update as well), so that a report replaced
 * by a later one, or a presence older than the one kept, is seen written all the same. Call it
 * once the service has migrated the store.
 */
export async function recordCarWrites(store: TestStore): Promise<CarWrites> {
  for (const statement of [
    'create table test_status_writes (device_id text not null, reported_at timestamptz not null)',
    'create table test_presence_writes (device_id text not null, presence_at timestamptz not null)',
    `create function test_record_status() returns trigger language plpgsql as $$
      begin insert into test_status_writes values (new.device_id, new.reported_at); return new; end $$`,
    `create function test_record_presence() returns trigger language plpgsql as $$
      begin
        if new.presence_at is not null then
          insert into test_presence_writes values (new.device_id, new.presence_at);
        end if;
        return new;
      end $$`,
    `create trigger test_record_status before insert on car_status_reports
      for each row execute function test_record_status()`,
    `create trigger test_record_presence before insert on car_presence
      for each row execute function test_record_presence()`,
  ]) {
    await store.db.raw(statement);
  }
  const read = async (table: string, column: string) => {
    const rows: { device_id: string; at: Date }[] = await store
      .db(table)
      .select('device_id', `${column} as at`);
    const written = new Map<string, Set<string>>();
    for (const row of rows) {
      const times = written.get(row.device_id) ?? new Set<string>();
      times.add(new Date(row.at).toISOString());
      written.set(row.device_id, times);
    }
    return written;
  };
  return {
    statuses: () => read('test_status_writes', 'reported_at'),
    presences: () => read('test_presence_writes', 'presence_at'),
  };
}

/**
 * What the cars handed over and the service has not written: 0 and 0 when nothing was lost.
 * `unsure` leaves out, per car, the messages from one index of `handed` to another (see its use).
 */
export async function notWritten(
  fleet: StreamingFleet,
  writes: CarWrites,
  unsure: Map<string, { from: number; to: number }> = new Map(),
): Promise<{ statuses: number; presences: number; checked: number }> {
  const written = { status: await writes.statuses(), presence: await writes.presences() };
  const lost = { status: 0, presence: 0 };
  let checked = 0;
  for (const car of fleet.cars) {
    const skip = unsure.get(car.deviceId);
    car.handed.forEach(({ suffix, at }, index) => {
      if (skip && index >= skip.from && index < skip.to) return;
      checked += 1;
      if (!written[suffix].get(car.deviceId)?.has(at)) lost[suffix] += 1;
    });
  }
  return { statuses: lost.status, presences: lost.presence, checked };
}
