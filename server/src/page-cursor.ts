/**
 * The `cursor` of a paged list: where the page before ended, as base64url JSON of that item's time
 * and id. Opaque to callers; read back only when it is exactly what this service wrote, so a forged
 * time (year 275760) or id never reaches the store.
 */
import { InputError } from './errors.ts';

export interface PagePosition {
  at: Date;
  id: string;
}

export function encodePageCursor(at: Date, id: string): string {
  return Buffer.from(JSON.stringify([at.toISOString(), id])).toString('base64url');
}

/** The position `cursor` names, its id checked by `isId`; else 400 `invalid_cursor`. */
export function decodePageCursor(cursor: string, isId: (id: string) => boolean): PagePosition {
  try {
    const [at, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown[];
    const time = new Date(String(at));
    if (
      typeof at === 'string' &&
      /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(at) &&
      !Number.isNaN(time.getTime()) &&
      time.toISOString() === at &&
      typeof id === 'string' &&
      isId(id)
    ) {
      return { at: time, id };
    }
  } catch {}
  throw new InputError(
    'invalid_cursor',
    'The cursor is not one this service gave: start from the first page.',
    {
      errors: [{ path: '/query/cursor', message: 'must be the next_cursor of a page' }],
    },
  );
}
