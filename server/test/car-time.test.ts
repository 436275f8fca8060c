// The rule for times from a car's clock (car-time.ts) at its edges, and that it covers every time
// field of what cars send as the contract has them.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { serviceReceives } from '../../generated/mqtt.ts';
import { carClockSkewMs, carTimeFields, carTimeRefusal } from '../src/mqtt/car-time.ts';

const now = new Date('2026-11-21T10:00:00Z');

describe("times from a car's clock", () => {
  it('when a time has its offset, is from 1970 on and at most five minutes ahead then it is taken', () => {
    for (const time of [
      '2026-11-21T10:00:00Z',
      '2026-11-21T10:05:00Z',
      '2026-11-21T10:05:00.000Z',
      '2026-11-21T23:59:00+14:00',
      '2026-11-20T22:04:59-12:00',
      '2026-11-21t09:59:59.123456789z',
      '2016-12-31T23:59:60Z',
      '1970-01-01T00:00:00Z',
    ]) {
      expect(carTimeRefusal(time, now), time).toBeUndefined();
    }
  });

  it('when a time is one the store cannot hold, or lacks its offset, or runs ahead by more than five minutes then it is refused', () => {
    expect(carClockSkewMs).toBe(5 * 60_000);
    const refused: [string, RegExp][] = [
      ['0000-01-01T00:00:00Z', /before 1970/],
      // Years before 100 come back from the store as 19xx: none is taken.
      ['0001-01-01T00:00:00Z', /before 1970/],
      ['0050-06-15T12:00:00Z', /before 1970/],
      ['1970-01-01T00:00:00+00:01', /before 1970/],
      ['2026-11-21T09:00:00+23:00', /offset beyond ±14:00/],
      ['2026-11-21T09:00:00-16:00', /offset beyond ±14:00/],
      ['2026-11-21T09:00:00+14:01', /offset beyond ±14:00/],
      ['2026-11-21T09:00:00+05:60', /offset beyond ±14:00/],
      ['2026-11-21T09:00:00', /RFC 3339/],
      ['2026-11-21T09:00:00+0530', /RFC 3339/],
      ['2026-11-21 09:00:00Z', /RFC 3339/],
      ['2026-02-30T09:00:00Z', /calendar/],
      ['9999-12-31T23:59:59Z', /more than 5 minutes ahead/],
      ['2026-11-21T10:05:00.001Z', /more than 5 minutes ahead/],
      ['2026-11-21T12:05:01+02:00', /more than 5 minutes ahead/],
    ];
    for (const [time, why] of refused) expect(carTimeRefusal(time, now), time).toMatch(why);
  });

  it('when the contract has a date-time field in a message a car sends then the rule reads that field, and it is the only one', () => {
    const contract = parse(readFileSync(new URL('../../asyncapi/asyncapi.yaml', import.meta.url), 'utf8'));
    const timeFields: Record<string, string[]> = {};
    for (const channel of Object.values<{ address: string; messages: Record<string, { $ref: string }> }>(
      contract.channels,
    )) {
      const suffix = channel.address.split('/').slice(3).join('/');
      if (!(serviceReceives as readonly string[]).includes(suffix)) continue;
      for (const { $ref } of Object.values(channel.messages)) {
        const message = contract.components.messages[$ref.split('/').pop() as string];
        const schema = contract.components.schemas[message.payload.$ref.split('/').pop()];
        timeFields[suffix] = Object.entries<{ format?: string }>(schema.properties)
          .filter(([, property]) => property.format === 'date-time')
          .map(([name]) => name);
      }
    }
    expect(Object.keys(timeFields).sort()).toEqual([...serviceReceives].sort());
    for (const suffix of serviceReceives) expect(timeFields[suffix], suffix).toEqual([carTimeFields[suffix]]);
  });
});
