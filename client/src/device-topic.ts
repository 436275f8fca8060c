/** MQTT topics of a device: the one place the `<brand>:` prefix is dropped, and put back. */
import { type CarTopicSuffix, carTopic, parseCarTopic } from '../../generated/mqtt.ts';
import { fromTopicSegments, toTopicSegments } from './device-id.ts';

export type { CarTopicSuffix } from '../../generated/mqtt.ts';

export interface DeviceTopic {
  deviceId: string;
  brand: string;
  nativeId: string;
  suffix: CarTopicSuffix;
}

/** `brand_a:1HGCM82633A004352`, `status` → `cars/brand_a/1HGCM82633A004352/status`; validates the id first. */
export function deviceTopic(deviceId: string, suffix: CarTopicSuffix): string {
  const { brand, nativeId } = toTopicSegments(deviceId);
  return carTopic(brand, nativeId, suffix);
}

/**
 * The device a topic belongs to, with its full prefixed id; `undefined` for a topic that is not
 * a device topic at all, a DeviceIdError when its brand or native-id segment is not valid.
 */
export function parseDeviceTopic(topic: string): DeviceTopic | undefined {
  const parts = parseCarTopic(topic);
  if (!parts) return undefined;
  const deviceId = fromTopicSegments(parts.brand, parts.nativeId);
  return { deviceId, ...parts };
}
