// The intake handlers on their own, with services that record what they are asked: which service
// each message reaches, in which order, and what the dispatch is told of it. The bridge suites
// (bridge.test.ts, car-commands.test.ts) show the same end to end, through a broker and a store.
import { describe, expect, it } from 'vitest';
import type { CarCommandAck, CarPresence } from '../../generated/mqtt.ts';
import { createIntake, type IntakeServices } from '../src/mqtt/intake/index.ts';

const deviceId = 'brand_a:1HGCM82633A004352';
const seenAt = new Date('2026-11-21T10:00:00Z');

/** Services that record each call as `service.method`, and answer as told. */
function recordingServices(answers: { carKnown: boolean }) {
  const calls: string[] = [];
  const services: IntakeServices = {
    carReports: {
      saveStatus: async () => {
        calls.push('carReports.saveStatus');
        return answers.carKnown ? 'stored' : 'unknown_car';
      },
      savePresence: async () => {
        calls.push('carReports.savePresence');
        return answers.carKnown;
      },
      sighted: async (_deviceId, at) => {
        calls.push(`carReports.sighted ${at?.toISOString() ?? 'retained'}`);
        return answers.carKnown;
      },
    },
    telemetry: {
      add: async () => {
        calls.push('telemetry.add');
      },
    },
    commands: {
      acknowledge: async () => {
        calls.push('commands.acknowledge');
        return 'stored';
      },
      carOnline: () => {
        calls.push('commands.carOnline');
      },
    },
    clock: () => seenAt,
  };
  return { services, calls };
}

const ack: CarCommandAck = {
  command_id: '0b8e7c1e-3f5a-4c2d-9a41-6f0d2b7c9e15',
  device_id: deviceId,
  brand: 'brand_a',
  outcome: 'completed',
  at: seenAt.toISOString(),
};

const presence = (state: CarPresence['state']): CarPresence => ({
  device_id: deviceId,
  brand: 'brand_a',
  state,
  at: seenAt.toISOString(),
});

describe('the intake of a cmd/ack', () => {
  it('when the car is provisioned then it is sighted, and the commands take the acknowledgement', async () => {
    const { services, calls } = recordingServices({ carKnown: true });
    expect(await createIntake(services)['cmd/ack'](deviceId, ack, seenAt)).toBe('stored');
    expect(calls).toEqual([`carReports.sighted ${seenAt.toISOString()}`, 'commands.acknowledge']);
  });

  it('when the car is not provisioned then it is unknown_car, whatever the commands made of it', async () => {
    // Both are asked at once; a car not provisioned has no command to move (car_commands' foreign key).
    const { services } = recordingServices({ carKnown: false });
    expect(await createIntake(services)['cmd/ack'](deviceId, ack, undefined)).toBe('unknown_car');
  });
});

describe('the intake of a presence', () => {
  it('when a car says online, live, then its commands go out again', async () => {
    const { services, calls } = recordingServices({ carKnown: true });
    expect(await createIntake(services).presence(deviceId, presence('online'), seenAt)).toBe('stored');
    expect(calls).toEqual(['carReports.savePresence', 'commands.carOnline']);
  });

  it('when the online is a retained replay, or says offline, or the car is not provisioned then no command goes out', async () => {
    for (const [state, at, carKnown, handled] of [
      ['online', undefined, true, 'stored'],
      ['offline', seenAt, true, 'stored'],
      ['online', seenAt, false, 'unknown_car'],
    ] as const) {
      const { services, calls } = recordingServices({ carKnown });
      expect(await createIntake(services).presence(deviceId, presence(state), at)).toBe(handled);
      expect(calls).toEqual(['carReports.savePresence']);
    }
  });
});
