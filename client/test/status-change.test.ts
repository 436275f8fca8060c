/**
 * What a `statuschange` event says changed (runtime/status-change.ts): `online` and each key of the
 * car's state, never its times.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import type { CarStatus } from '../../generated/sdk-models.ts';
import { changedFields } from '../src/runtime/status-change.ts';

const before: CarStatus = {
  deviceId: 'brand_a:1HGCM82633A004352',
  brand: 'brand_a',
  online: true,
  lastSeen: '2025-01-01T10:00:00Z',
  state: { ignition: false, doors_locked: true, tyres: { front: [2.3, 2.3], rear: [2.5, 2.5] } },
  reportedAt: '2025-01-01T10:00:00Z',
};

const after = (changes: Partial<CarStatus>): CarStatus => ({
  ...before,
  lastSeen: '2025-01-01T10:05:00Z',
  reportedAt: '2025-01-01T10:05:00Z',
  ...changes,
});

describe('what a statuschange says changed', () => {
  test('when only the times of the report move then nothing changed', () => {
    assert.deepEqual(changedFields(before, after({ state: structuredClone(before.state) })), []);
  });

  test('when the ignition turns on and the car goes offline then it names online and state.ignition', () => {
    assert.deepEqual(
      changedFields(before, after({ online: false, state: { ...before.state, ignition: true } })),
      ['online', 'state.ignition'],
    );
  });

  test('when a nested value of the state changes, a key is added and one removed then it names each of them', () => {
    const { doors_locked: _gone, ...rest } = before.state;
    const next = after({ state: { ...rest, tyres: { front: [2.3, 1.1], rear: [2.5, 2.5] }, fuel: 0.4 } });
    assert.deepEqual(changedFields(before, next), ['state.tyres', 'state.fuel', 'state.doors_locked']);
  });

  test('when a value turns from an array into an object of the same members then it changed', () => {
    const next = after({ state: { ...before.state, tyres: { 0: 2.3, 1: 2.3 } } });
    const previous = { ...before, state: { ...before.state, tyres: [2.3, 2.3] } };
    assert.deepEqual(changedFields(previous, next), ['state.tyres']);
  });

  test('when the app had no status before then every field is named', () => {
    assert.deepEqual(changedFields(undefined, before), [
      'online',
      'state.ignition',
      'state.doors_locked',
      'state.tyres',
    ]);
  });
});
