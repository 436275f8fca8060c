/**
 * Command round trips for the benchmarks: a measurer (a child process of its own) that sends rounds
 * of commands to simulated cars either as a bare mqtt.js publish or through the service, and the
 * rounds' figures. bench/commands.ts says how and why it measures so.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import mqtt, { type MqttClient } from 'mqtt';
import {
  type CarCommand,
  type CarCommandAck,
  carTopic,
  carTopicFilter,
  carTopicQos,
} from '../../generated/mqtt.ts';
import { sample } from '../../server/test/support/metrics.ts';
import { type Child, errorText, type RunningChild } from './children.ts';
import { callJson, type SignIn } from './service.ts';
import { pause, percentile } from './settings.ts';

export type Path = 'bare' | 'service';
export type DoorsCommand = 'doors.lock' | 'doors.unlock';

/** How long one command may take before it counts as lost. */
export const giveUpMs = 30_000;
/** How often the measurer asks again for a command the service has not moved to `completed` yet. */
const pollMs = 50;

/** Parent → measurer. */
export interface MeasureOrder {
  apiUrl: string;
  token: string;
  signIn: SignIn;
  deviceIds: string[];
  spreadMs: number;
}

/** Parent → measurer: one round. */
export interface RoundOrder {
  path: Path;
  name: DoorsCommand;
}

/** A command through the service that the car completed: where to read it, and when it was POSTed. */
interface ServiceTrip {
  url: string;
  /** Wall-clock ms. */
  startedAt: number;
  /** From the POST to its answer, in ms. */
  answeredMs: number;
}

export interface RoundResult {
  /** Round trips, in ms, of the commands that completed. */
  delaysMs: number[];
  /** Commands that did not complete: why, one line each. */
  failures: string[];
  /** GET …/commands/{id} asked, in all. */
  reads: number;
  /** Through the service: each POST's time to its 202, in ms (where a round trip's time goes). */
  answeredMs: number[];
}

/** The car's `completed` (or another final outcome) of each command, as the broker delivers it. */
function watchAcks(client: MqttClient) {
  const seen = new Map<string, CarCommandAck['outcome']>();
  const waiting = new Map<string, (outcome: CarCommandAck['outcome']) => void>();
  client.on('message', (_topic, payload) => {
    let ack: CarCommandAck;
    try {
      ack = JSON.parse(payload.toString('utf8'));
    } catch {
      return;
    }
    if (ack.outcome === 'accepted' || typeof ack.command_id !== 'string') return;
    const waiter = waiting.get(ack.command_id);
    if (waiter) {
      waiting.delete(ack.command_id);
      waiter(ack.outcome);
    } else {
      // Before the POST answered with the command's id (the car can be that quick).
      seen.set(ack.command_id, ack.outcome);
    }
  });
  return {
    /** The command's final outcome from the car, or `timeout`. */
    final(commandId: string, deadline: number): Promise<CarCommandAck['outcome'] | 'timeout'> {
      const already = seen.get(commandId);
      if (already) {
        seen.delete(commandId);
        return Promise.resolve(already);
      }
      return new Promise((resolve) => {
        const timer = setTimeout(
          () => {
            waiting.delete(commandId);
            resolve('timeout');
          },
          Math.max(0, deadline - performance.now()),
        );
        waiting.set(commandId, (outcome) => {
          clearTimeout(timer);
          resolve(outcome);
        });
      });
    },
  };
}

/** A command's name with the arguments of that name. */
type CommandAsked = {
  [Name in CarCommand['name']]: Pick<Extract<CarCommand, { name: Name }>, 'name' | 'args'>;
}[CarCommand['name']];

/**
 * A command as the service would send it, made here to publish straight to the car (the bare
 * path of bench:commands, bench:fleet and bench:rollout), expiring in `ttlMs`; and the car's topic.
 */
export function bareCommand(
  deviceId: string,
  what: CommandAsked,
  ttlMs: number,
): { command: CarCommand; topic: string } {
  const colon = deviceId.indexOf(':');
  const brand = deviceId.slice(0, colon) as CarCommand['brand'];
  const issued = new Date();
  return {
    command: {
      command_id: randomUUID(),
      device_id: deviceId,
      brand,
      ...what,
      issued_at: issued.toISOString(),
      expires_at: new Date(issued.getTime() + ttlMs).toISOString(),
    } as CarCommand,
    topic: carTopic(brand, deviceId.slice(colon + 1), 'cmd'),
  };
}

/** Times rounds of commands, on the bare path or through the service, as the parent orders. */
export async function startMeasurer(
  order: MeasureOrder,
): Promise<RunningChild<true, RoundOrder, RoundResult>> {
  const client = await mqtt.connectAsync(order.signIn.url, {
    username: order.signIn.username,
    password: order.signIn.password,
    clientId: order.signIn.clientId,
    protocolVersion: order.signIn.protocolVersion,
    clean: true,
    reconnectPeriod: 0,
  });
  const acks = watchAcks(client);
  const [granted] = await client.subscribeAsync(carTopicFilter('cmd/ack'), { qos: carTopicQos['cmd/ack'] });
  if (!granted || granted.qos >= 0x80) throw new Error('the broker refused the subscription to cmd/ack');
  /** GETs asked in the round under way. */
  let reads = 0;

  /** Bare: the command published straight to the car, until its `completed`. */
  async function bare(deviceId: string, name: DoorsCommand): Promise<number | string> {
    const { command, topic } = bareCommand(deviceId, { name, args: {} }, 300_000);
    const started = performance.now();
    await client.publishAsync(topic, JSON.stringify(command), { qos: carTopicQos.cmd });
    const outcome = await acks.final(command.command_id, started + giveUpMs);
    return outcome === 'completed' ? performance.now() - started : `bare ${name}: ${outcome}`;
  }

  /**
   * Through the service: POST, and wait for the car's `completed`; when the service moved the
   * command to `completed` is read after the round (`readCompletion`).
   */
  async function service(deviceId: string, name: DoorsCommand): Promise<ServiceTrip | string> {
    const commands = `${order.apiUrl}/api/v1/cars/${encodeURIComponent(deviceId)}/commands`;
    // Wall-clock time, the service's clock: `updated_at` is on it (one machine, one clock).
    const startedAt = Date.now();
    const started = performance.now();
    const sent = await callJson(commands, { method: 'POST', token: order.token, body: { name } });
    const answeredMs = performance.now() - started;
    const commandId = sent.body.command_id;
    if (sent.status !== 202 || typeof commandId !== 'string') {
      return `POST ${name} answered ${sent.status}: ${sent.text}`;
    }
    const outcome = await acks.final(commandId, started + giveUpMs);
    if (outcome !== 'completed') return `service ${name}: the car said ${outcome}`;
    return { url: `${commands}/${commandId}`, startedAt, answeredMs };
  }

  /** POST to the command's `updated_at` as `completed`, in ms, read once the service says so. */
  async function readCompletion(trip: ServiceTrip, deadline: number): Promise<number | string> {
    for (;;) {
      const read = await callJson(trip.url, { token: order.token });
      reads += 1;
      if (read.body.state === 'completed') return Date.parse(String(read.body.updated_at)) - trip.startedAt;
      if (read.status !== 200 || performance.now() > deadline) {
        return `GET ${trip.url} answered ${read.status}: ${read.text.slice(0, 200)}`;
      }
      await pause(pollMs);
    }
  }

  return {
    ready: true,
    async answer({ path, name }: RoundOrder): Promise<RoundResult> {
      reads = 0;
      const result: RoundResult = { delaysMs: [], failures: [], reads: 0, answeredMs: [] };
      const trips: ServiceTrip[] = [];
      const step = order.spreadMs / order.deviceIds.length;
      const roundStart = performance.now();
      await Promise.all(
        order.deviceIds.map(async (deviceId, index) => {
          await pause(roundStart + index * step - performance.now());
          const outcome = await (path === 'bare' ? bare : service)(deviceId, name).catch(errorText);
          if (typeof outcome === 'number') result.delaysMs.push(outcome);
          else if (typeof outcome === 'string') result.failures.push(outcome);
          else {
            trips.push(outcome);
            result.answeredMs.push(outcome.answeredMs);
          }
        }),
      );
      // Read after the round, so that asking does not load the service while it works; one deadline
      // for them all, so that a service far behind costs a round 30 s, not 30 s a command.
      const readDeadline = performance.now() + giveUpMs;
      for (const trip of trips) {
        const delay = await readCompletion(trip, readDeadline).catch(errorText);
        if (typeof delay === 'number') result.delaysMs.push(delay);
        else result.failures.push(delay);
      }
      return { ...result, reads };
    },
    stop: () => client.endAsync(),
  };
}

export interface PathFigures {
  p50: number;
  p99: number;
  samples: number;
  failures: string[];
  /** GETs per command. */
  readsPerCommand: number;
  /** Through the service: the POST's answer p50 / p99, in ms (NaN on the bare path). */
  answeredP50: number;
  answeredP99: number;
}

export function figures(results: RoundResult[]): PathFigures {
  const delays = results.flatMap((result) => result.delaysMs).sort((a, b) => a - b);
  const answered = results.flatMap((result) => result.answeredMs).sort((a, b) => a - b);
  return {
    p50: percentile(delays, 0.5),
    p99: percentile(delays, 0.99),
    samples: delays.length,
    failures: results.flatMap((result) => result.failures),
    readsPerCommand: results.reduce((sum, result) => sum + result.reads, 0) / Math.max(1, delays.length),
    answeredP50: percentile(answered, 0.5),
    answeredP99: percentile(answered, 0.99),
  };
}

/**
 * Rounds of commands through `measurer`, alternating between the paths (bare then service, service
 * then bare, …, so that neither gets the quieter half of the run), `doors.lock` and `doors.unlock`
 * in turn so that each command changes the doors; the first pair warms up and is not counted.
 */
export async function measureCommandRounds(options: {
  measurer: Child<true, RoundOrder, RoundResult>;
  /** The metrics of each service process: the bare path's acknowledgements are counted there. */
  metricsUrls: string[];
  rounds: number;
  cars: number;
  label: string;
}): Promise<{ bare: PathFigures; service: PathFigures; catchUpMs: number }> {
  const { measurer, label } = options;
  const results: Record<Path, RoundResult[]> = { bare: [], service: [] };
  // The service's bridge sees the bare path's acknowledgements too (two a command, each dropped as
  // of a command it never sent), and may still be at them when the round ends: a service round
  // starts once it is through, so that it does not pay for the bare round's traffic.
  let bareAcks = 0;
  const bareAcksHandled = async () => {
    const counts = await Promise.all(
      options.metricsUrls.map(async (url) =>
        sample(await (await fetch(url)).text(), 'svc_mqtt_dropped_total', { reason: 'unknown_command' }),
      ),
    );
    return counts.reduce((sum, count) => sum + count, 0);
  };
  const catchingUpMs: number[] = [];
  // A round on each path, then another the other way round; the first pair warms up.
  const pairs = options.rounds + 1;
  process.stderr.write(
    `${label}: ${pairs} rounds a path of ${options.cars} commands, the first to warm up\n`,
  );
  let round = 0;
  for (let pair = 0; pair < pairs; pair++) {
    const order: Path[] = pair % 2 === 0 ? ['bare', 'service'] : ['service', 'bare'];
    for (const path of order) {
      const name: DoorsCommand = round++ % 2 === 0 ? 'doors.lock' : 'doors.unlock';
      const result = await measurer.ask({ path, name });
      if (pair > 0) results[path].push(result);
      if (path === 'bare') {
        bareAcks += 2 * result.delaysMs.length;
        const roundEnd = performance.now();
        while ((await bareAcksHandled()) < bareAcks) {
          if (performance.now() - roundEnd > giveUpMs) {
            // A bridge that far behind (bench:fleet, a fleet it cannot keep up with) is itself the
            // finding: the next round goes on, and the catch-up reports the wait.
            process.stderr.write(
              `${label}: the bridge handled ${await bareAcksHandled()} of ${bareAcks} bare acknowledgements in ${giveUpMs / 1000} s; going on\n`,
            );
            break;
          }
          await pause(20);
        }
        if (pair > 0) catchingUpMs.push(performance.now() - roundEnd);
      }
    }
  }
  return {
    bare: figures(results.bare),
    service: figures(results.service),
    catchUpMs: Math.max(...catchingUpMs),
  };
}
