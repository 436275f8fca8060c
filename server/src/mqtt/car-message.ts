/**
 * One MQTT message from a car, read as the contract says: a topic the service receives, the
 * device it names, a JSON payload that passes its AsyncAPI schema and carries a time the service
 * takes (car-time.ts), and a payload `device_id` and `brand` that agree with the topic. Anything else is a drop reason, never an exception.
 * Payloads are bounded in size and in nesting before anything walks them, so that no message can
 * hold the bridge for long or exhaust its stack (the brokers bound packets too; this holds
 * whatever the broker lets through).
 */
import { DeviceIdError, fromTopicSegments } from '@svc/sdk';
import {
  type CarTopicPayloads,
  parseCarTopic,
  type ServiceReceivedSuffix,
  serviceReceives,
} from '../../../generated/mqtt.ts';
import { payloadValidators } from '../../../generated/mqtt-payload-validators.cjs';
import { maxPacketBytes } from '../broker/packet-size-guard.ts';
import { maxJsonDepth, nestedDeeperThan } from '../json-nesting.ts';
import { carTimeFields, carTimeRefusal } from './car-time.ts';

/** Why the bridge drops a message: a bounded set, so each is a metric label. */
export const dropReasons = [
  'invalid_topic',
  'not_json',
  'invalid_payload',
  'topic_mismatch',
  'unknown_car',
  'handler_failed',
  'store_unavailable',
  'too_large',
  'unknown_command',
  'command_of_another_car',
] as const;

export type DropReason = (typeof dropReasons)[number];

export type CarMessage = {
  [S in ServiceReceivedSuffix]: { suffix: S; deviceId: string; payload: CarTopicPayloads[S] };
}[ServiceReceivedSuffix];

export type ReadMessage =
  | { ok: true; message: CarMessage }
  | { ok: false; reason: DropReason; suffix?: ServiceReceivedSuffix; deviceId?: string; detail?: string };

const received: ReadonlySet<string> = new Set(serviceReceives);
const isReceived = (suffix: string): suffix is ServiceReceivedSuffix => received.has(suffix);
// Invalid UTF-8 is not JSON: decoding fails rather than smuggling in replacement characters.
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** `now`: the service's time, which a car's times may not run ahead of by more than the skew. */
export function readCarMessage(topic: string, bytes: Uint8Array, now = new Date()): ReadMessage {
  const parts = parseCarTopic(topic);
  if (!parts || !isReceived(parts.suffix)) return { ok: false, reason: 'invalid_topic' };
  const { suffix } = parts;
  let deviceId: string;
  try {
    deviceId = fromTopicSegments(parts.brand, parts.nativeId);
  } catch (error) {
    if (error instanceof DeviceIdError) return { ok: false, reason: 'invalid_topic', suffix };
    throw error;
  }
  if (bytes.byteLength > maxPacketBytes) return { ok: false, reason: 'too_large', suffix, deviceId };
  let payload: unknown;
  try {
    payload = JSON.parse(utf8.decode(bytes));
  } catch {
    return { ok: false, reason: 'not_json', suffix, deviceId };
  }
  if (nestedDeeperThan(payload, maxJsonDepth)) {
    return {
      ok: false,
      reason: 'invalid_payload',
      suffix,
      deviceId,
      detail: `nested deeper than ${maxJsonDepth} levels`,
    };
  }
  const validate = payloadValidators[suffix];
  if (!validate(payload)) {
    // Where and what rule, never the value: a payload may hold anything.
    const detail = (validate.errors ?? [])
      .slice(0, 3)
      .map((e) => `${e.instancePath || '/'} ${e.message ?? e.keyword}`)
      .join('; ');
    return { ok: false, reason: 'invalid_payload', suffix, deviceId, detail };
  }
  const timeField = carTimeFields[suffix];
  const refusal = carTimeRefusal(String((payload as Record<string, unknown>)[timeField]), now);
  if (refusal !== undefined) {
    return { ok: false, reason: 'invalid_payload', suffix, deviceId, detail: `/${timeField} ${refusal}` };
  }
  if (payload.device_id !== deviceId || payload.brand !== parts.brand) {
    return { ok: false, reason: 'topic_mismatch', suffix, deviceId };
  }
  const message = { suffix, deviceId, payload } as CarMessage;
  // An id comes in either case (client/src/uuid.ts); the service uses it in lower case.
  if (message.suffix === 'cmd/ack') message.payload.command_id = message.payload.command_id.toLowerCase();
  return { ok: true, message };
}
