/**
 * What changed between two statuses of one car, as the `statuschange` event names it: `online`,
 * and `state.<key>` for each key of the car's reported state that was added, removed or given
 * another value. The times (`lastSeen`, `reportedAt`) move with every report and are not news.
 */
import type { CarStatus } from '../../../generated/sdk-models.ts';

/** Past this depth two values of a state are taken as different rather than compared further. */
const maxCompareDepth = 32;

/**
 * The fields of `next` that differ from `previous`; every field (`online` and each key of `state`)
 * when there is no previous status to compare with.
 */
export function changedFields(previous: CarStatus | undefined, next: CarStatus): string[] {
  if (previous === undefined) return ['online', ...Object.keys(next.state).map((key) => `state.${key}`)];
  const changed = previous.online === next.online ? [] : ['online'];
  for (const key of Object.keys(next.state)) {
    if (!Object.hasOwn(previous.state, key) || !sameValue(previous.state[key], next.state[key], 0)) {
      changed.push(`state.${key}`);
    }
  }
  for (const key of Object.keys(previous.state)) {
    if (!Object.hasOwn(next.state, key)) changed.push(`state.${key}`);
  }
  return changed;
}

/** Whether two structured-clone values (a car's free-form state) are equal, member by member. */
function sameValue(a: unknown, b: unknown, depth: number): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (depth >= maxCompareDepth || Array.isArray(a) !== Array.isArray(b)) return false;
  const aKeys = Object.keys(a);
  const bRecord = b as Record<string, unknown>;
  return (
    aKeys.length === Object.keys(b).length &&
    aKeys.every(
      (key) =>
        Object.hasOwn(bRecord, key) &&
        sameValue((a as Record<string, unknown>)[key], bRecord[key], depth + 1),
    )
  );
}
