import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import { brands } from '../../generated/brands.ts';
import { carTopicSuffixes } from '../../generated/mqtt.ts';
import { DeviceIdError, deviceTopic, parseDeviceTopic } from '../src/index.ts';

const validIds = ['brand_a:1HGCM82633A004352', ...brands.slice(1).map((brand) => `${brand}:unit-42.x_Y`)];

describe('device topics', () => {
  for (const deviceId of validIds) {
    for (const suffix of carTopicSuffixes) {
      test(`when ${deviceId} goes to its ${suffix} topic and back then it is the same id`, () => {
        const topic = deviceTopic(deviceId, suffix);
        const [brand, nativeId] = deviceId.split(/:(.*)/s);
        assert.equal(topic, `cars/${brand}/${nativeId}/${suffix}`);
        assert.deepEqual(parseDeviceTopic(topic), { deviceId, brand, nativeId, suffix });
      });
    }
  }

  test('when the topic carries the prefix only in its brand segment then the native id segment has no colon', () => {
    assert.equal(
      deviceTopic('brand_a:1HGCM82633A004352', 'cmd/ack'),
      'cars/brand_a/1HGCM82633A004352/cmd/ack',
    );
  });

  const refusedIds: [string, string][] = [
    ['1HGCM82633A004352', 'missing_prefix'],
    ['brand_x:1HGCM82633A004352', 'unknown_brand'],
    ['brand_b:a/b', 'invalid_native_id'],
    ['brand_b:a+b', 'invalid_native_id'],
    ['brand_b:#', 'invalid_native_id'],
  ];
  for (const [deviceId, code] of refusedIds) {
    test(`when the id is ${JSON.stringify(deviceId)} then no topic is built (${code})`, () => {
      assert.throws(
        () => deviceTopic(deviceId, 'status'),
        (error) => error instanceof DeviceIdError && error.code === code,
      );
    });
  }

  const foreignTopics = [
    'cars/brand_a/1HGCM82633A004352/unknown',
    'vehicles/brand_a/X/status',
    'cars/brand_a//status',
  ];
  for (const topic of foreignTopics) {
    test(`when the topic is ${topic} then it is not a device topic`, () => {
      assert.equal(parseDeviceTopic(topic), undefined);
    });
  }

  const badSegments: [string, string][] = [
    ['cars/BRAND_A/1HGCM82633A004352/status', 'unknown_brand'],
    ['cars/brand_a/1HGCM82633A00435/status', 'invalid_native_id'],
    ['cars/brand_a/1hgcm82633a004352/telemetry', 'invalid_native_id'],
  ];
  for (const [topic, code] of badSegments) {
    test(`when the topic is ${topic} then its device is refused (${code})`, () => {
      assert.throws(
        () => parseDeviceTopic(topic),
        (error) => error instanceof DeviceIdError && error.code === code,
      );
    });
  }
});
