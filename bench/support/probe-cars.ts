/**
 * Probe cars: how long a car's status takes from its publication to `GET /api/v1/cars/{id}/status`
 * showing it, measured in a child process of its own beside a benchmark's fleet.
 */
import { performance } from 'node:perf_hooks';
import type { CarCredential } from '@svc/car-simulator';
import mqtt, { type MqttClient } from 'mqtt';
import { type CarStatusReport, carTopic, carTopicQos } from '../../generated/mqtt.ts';
import { errorText, type RunningChild } from './children.ts';
import { callJson } from './service.ts';
import { pause } from './settings.ts';

/** Parent → probe child. */
export interface ProbeQuestion {
  /** Start afresh from here: the delays measured so far are dropped. */
  reset?: boolean;
  /** Stop, and count the last ones in. */
  finish?: boolean;
}

/** Parent → probe child: its order. */
export interface ProbeOrder {
  mqttUrl: string;
  apiUrl: string;
  token: string;
  cars: CarCredential[];
  /** How long a marker may take to show before it counts as unseen. */
  giveUpMs: number;
}

export interface ProbeResults {
  /** Status reports the broker acknowledged. */
  statusSent: number;
  /** Since the last reset, publish to shown, in ms. */
  delaysMs: number[];
  /** Markers that never showed within `giveUpMs`. */
  unseen: number;
}

/**
 * Probe cars, in a process of their own so that the fleet's busy event loop does not add to the
 * delays: each publishes a status with a fresh marker, polls the read route until it shows it,
 * rests 100 ms, and again, until told to finish.
 */
export async function startProbes(
  order: ProbeOrder,
): Promise<RunningChild<true, ProbeQuestion, ProbeResults>> {
  const results: ProbeResults = { statusSent: 0, delaysMs: [], unseen: 0 };
  let finishing = false;
  const clients: MqttClient[] = [];
  for (const car of order.cars) {
    clients.push(
      await mqtt.connectAsync(order.mqttUrl, {
        clientId: car.deviceId,
        username: car.deviceId,
        password: car.password,
        protocolVersion: 4,
        reconnectPeriod: 0,
      }),
    );
  }
  async function probe(car: CarCredential, client: MqttClient, index: number): Promise<void> {
    const [brand, nativeId] = car.deviceId.split(':') as [CarStatusReport['brand'], string];
    const route = `${order.apiUrl}/api/v1/cars/${encodeURIComponent(car.deviceId)}/status`;
    for (let round = 0; !finishing; round++) {
      const marker = `${index}-${round}`;
      const report: CarStatusReport = {
        device_id: car.deviceId,
        brand,
        reported_at: new Date().toISOString(),
        host_version: '2.14.0',
        state: { ignition: true, probe: marker },
        installed_apps: [],
      };
      const published = performance.now();
      await client.publishAsync(carTopic(brand, nativeId, 'status'), JSON.stringify(report), {
        qos: carTopicQos.status,
      });
      results.statusSent += 1;
      let seen = false;
      for (let poll = 0; !seen && performance.now() - published < order.giveUpMs; poll++) {
        // A poll whose connection failed (read ECONNRESET, seen once on a kept-alive connection
        // under heavy load) is lost, not the whole run.
        const answer = await callJson(route, { token: order.token }).catch((error: unknown) => {
          if (error instanceof TypeError && error.message === 'fetch failed') return undefined;
          throw error;
        });
        if (!answer) continue;
        if (answer.status !== 200) throw new Error(`GET status answered ${answer.status}: ${answer.text}`);
        seen = (answer.body.state as Record<string, unknown> | undefined)?.probe === marker;
        if (!seen) await pause(Math.min(20, 5 * 2 ** poll));
      }
      if (seen) results.delaysMs.push(performance.now() - published);
      else results.unseen += 1;
      await pause(100);
    }
  }
  const probing = Promise.all(
    order.cars.map((car, index) => probe(car, clients[index] as MqttClient, index)),
  );
  // A probe that fails fails the run: its question is answered by the exit.
  probing.catch((error: unknown) => {
    process.stderr.write(`${errorText(error)}\n`);
    process.exit(1);
  });
  let stopped: Promise<void> | undefined;
  const stop = () => {
    finishing = true;
    stopped ??= probing.then(async () => {
      await Promise.all(clients.map((client) => client.endAsync()));
    });
    return stopped;
  };
  return {
    ready: true,
    async answer({ reset, finish }) {
      if (finish) await stop();
      const counted = { ...results, delaysMs: [...results.delaysMs] };
      if (reset) {
        results.delaysMs = [];
        results.unseen = 0;
      }
      return counted;
    },
    stop,
  };
}
