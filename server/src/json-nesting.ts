/**
 * How deep the service lets JSON nest, in an HTTP body and in an MQTT payload alike. Nothing in
 * the contract nests deeper than a few levels (a status report's free-form `state` the most);
 * a document nested thousands deep is an attack on whatever walks it next (the validator, the
 * text check, JSON.stringify, the store's JSON functions), so it is refused right after parsing.
 */

/** The deepest nesting of objects and arrays taken, the outermost counting as 1. */
export const maxJsonDepth = 32;

/** Whether objects and arrays in `value` nest deeper than `limit`; walked without recursion. */
export function nestedDeeperThan(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  for (let next = stack.pop(); next; next = stack.pop()) {
    const [item, depth] = next;
    if (typeof item !== 'object' || item === null) continue;
    if (depth > limit) return true;
    for (const child of Object.values(item)) stack.push([child, depth + 1]);
  }
  return false;
}
