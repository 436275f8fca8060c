/**
 * Which times the service takes from a car's clock (a fix's `recorded_at`, a report's `reported_at`,
 * a presence `at`, an acknowledgement's `at`). The contract's `date-time` lets through times the
 * store cannot hold (year 0, an offset of +23:00, no offset at all, which the store would read in
 * its own zone) and times far ahead: one such fix failed the whole telemetry batch it was written
 * in, every car's, and a presence `at` in year 9999 outranked every later presence of the car for
 * good. A message carrying one is refused when it is read, before it reaches the store.
 */
import type { CarTopicPayloads, ServiceReceivedSuffix } from '../../../generated/mqtt.ts';

/**
 * How far ahead of the service's clock a car's may run. Cars set their clocks from GPS or the
 * network, so minutes cover any honest drift, and a presence `at` ahead by less than this
 * outranks the car's next presence messages for that long at most.
 */
export const carClockSkewMs = 5 * 60_000;

/** The widest offset from UTC in use (+14:00, Kiribati; -12:00 the other way). The store holds ±15:59. */
const maxOffsetMinutes = 14 * 60;

/**
 * The store holds times from 4713 BC, but a year before 100 comes back from the store's driver as
 * 19xx (JavaScript's two-digit years), and no car's clock honestly reads a time before the Unix
 * epoch (a clock that was never set reads 1970): nothing earlier is taken.
 */
const earliest = Date.parse('1970-01-01T00:00:00Z');

/** The field of each message a car sends that holds a time of its clock (the only one each has). */
export const carTimeFields = {
  'cmd/ack': 'at',
  status: 'reported_at',
  telemetry: 'recorded_at',
  presence: 'at',
} as const satisfies { readonly [S in ServiceReceivedSuffix]: keyof CarTopicPayloads[S] };

/** RFC 3339 `date-time`, its offset required: `Z`, or `+hh:mm` / `-hh:mm`. */
const dateTime = /^(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}):(\d{2})(\.\d+)?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

/** Why the service does not take `text` as a time from a car's clock at `now`; undefined when it does. */
export function carTimeRefusal(text: string, now: Date): string | undefined {
  const parts = dateTime.exec(text);
  if (!parts) return 'is not an RFC 3339 time (T between date and time) with its offset (Z or ±hh:mm)';
  const [, date, hoursMinutes, seconds, fraction = '', sign, offsetHours, offsetMinutes] = parts;
  const offset =
    sign === undefined ? 0 : (sign === '-' ? -1 : 1) * (Number(offsetHours) * 60 + Number(offsetMinutes));
  if (Math.abs(offset) > maxOffsetMinutes || Number(offsetMinutes) > 59) {
    return 'has an offset beyond ±14:00';
  }
  // A leap second (`23:59:60`, which the store takes as the next day's first second) is one past :59.
  const leap = seconds === '60' ? 1000 : 0;
  const local = Date.parse(`${date}T${hoursMinutes}:${leap ? '59' : seconds}${fraction.slice(0, 4)}Z`);
  // Date.parse moves 30 February to March; the calendar is the schema's to check, but this must not guess.
  if (Number.isNaN(local) || new Date(local).toISOString().slice(0, 10) !== date) {
    return 'is not a time of the calendar';
  }
  const at = local + leap - offset * 60_000;
  if (at < earliest) return 'is before 1970';
  if (at > now.getTime() + carClockSkewMs) {
    return `is more than ${carClockSkewMs / 60_000} minutes ahead of the service's clock`;
  }
  return undefined;
}
