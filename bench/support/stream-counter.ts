/**
 * The benchmarks' baseline for car messages: a bare mqtt.js subscriber (run as a child process of
 * its own) with the bridge's subscriptions, at its QoS, that only counts status and telemetry.
 */
import mqtt, { type IClientOptions } from 'mqtt';
import { carTopicFilter, carTopicQos, parseCarTopic, serviceReceives } from '../../generated/mqtt.ts';
import type { RunningChild } from './children.ts';
import type { SignIn } from './service.ts';

/** Parent → counter child. */
export interface CountOrder {
  signIn: SignIn;
}

export interface StreamCounts {
  status: number;
  telemetry: number;
}

/** The baseline: the bridge's subscriptions, at its QoS, and a count of status and telemetry. */
export async function startCounter({
  signIn,
}: CountOrder): Promise<RunningChild<true, unknown, StreamCounts>> {
  const counts: StreamCounts = { status: 0, telemetry: 0 };
  const options: IClientOptions = {
    username: signIn.username,
    password: signIn.password,
    clientId: signIn.clientId,
    protocolVersion: signIn.protocolVersion,
    clean: true,
    reconnectPeriod: 0,
  };
  const client = await mqtt.connectAsync(signIn.url, options);
  client.on('message', (topic) => {
    const suffix = parseCarTopic(topic)?.suffix;
    if (suffix === 'status' || suffix === 'telemetry') counts[suffix] += 1;
  });
  const granted = await client.subscribeAsync(
    Object.fromEntries(
      serviceReceives.map((suffix) => [carTopicFilter(suffix), { qos: carTopicQos[suffix] }]),
    ),
  );
  const refused = granted.filter((grant) => grant.qos >= 0x80);
  if (refused.length > 0)
    throw new Error(`the broker refused ${refused.map((grant) => grant.topic).join(', ')}`);
  return {
    ready: true,
    answer: async () => ({ ...counts }),
    stop: () => client.endAsync(),
  };
}
