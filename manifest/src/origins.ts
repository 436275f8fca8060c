/**
 * The rule on `network` that the schema's pattern cannot say: each origin is exactly
 * `https://host[:port]` as a browser writes its `Origin`, and each is listed once. The host compares
 * origins as strings, so two spellings of one origin would let one through and refuse the other.
 */
import { showValue } from './show-value.ts';

export const originRule = 'must be an https:// origin with no path, query, wildcard or credentials';

/** One item of `network` that breaks the rule, with the message that says how. */
export interface NetworkProblem {
  index: number;
  message: string;
}

/**
 * The problems of a manifest's `network` list. `failedPattern` holds the indexes the schema's
 * pattern refused: an origin that reads back fine from `new URL()` then still has a host the
 * pattern does not allow.
 */
export function checkNetwork(
  network: readonly unknown[],
  failedPattern: ReadonlySet<number> = new Set(),
): NetworkProblem[] {
  const problems: NetworkProblem[] = [];
  const firstIndexOf = new Map<string, number>();
  network.forEach((item, index) => {
    if (typeof item !== 'string') return;
    const faults = originFaults(item);
    if (faults.length === 0 && failedPattern.has(index)) {
      faults.push('its host may hold only letters, digits, "." and "-"');
    }
    const key = originKey(item);
    const earlier = firstIndexOf.get(key);
    if (earlier === undefined) firstIndexOf.set(key, index);
    const shown = showValue(redactCredentials(item));
    if (faults.length > 0) {
      if (earlier !== undefined) faults.push(`and network[${earlier}] is the same origin`);
      problems.push({ index, message: `${shown} ${originRule}: ${faults.join('; ')}` });
    } else if (earlier !== undefined) {
      const same = network[earlier] === item ? 'is listed twice' : 'is the same origin';
      problems.push({
        index,
        message: `${shown} ${same} (also as network[${earlier}]): list each origin once`,
      });
    }
  });
  return problems;
}

/** What is wrong with `origin` as an `Origin` a browser would send; none when it is one. */
export function originFaults(origin: string): string[] {
  if (origin.trim() === '') return ['it is empty: write an origin such as "https://api.example.com"'];
  if (origin.includes('*')) return ['it has a wildcard: list each origin in full'];
  if (!/^[a-z][a-z0-9+.-]*:/i.test(origin)) return [`it has no scheme: write "https://${origin}"`];
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return ['it is not a URL'];
  }
  const faults: string[] = [];
  if (url.protocol !== 'https:') faults.push(`it uses ${url.protocol}//`);
  if (url.username !== '' || url.password !== '') {
    faults.push('it has credentials: leave out "user:password@"');
  }
  if (url.pathname !== '/' && url.pathname !== '') faults.push(`it has a path ("${url.pathname}")`);
  else if (/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*\/$/i.test(origin)) faults.push('it ends with "/"');
  if (url.search !== '' || origin.includes('?')) faults.push('it has a query');
  if (url.hash !== '' || origin.includes('#')) faults.push('it has a fragment');
  if (faults.length > 0) return faults;
  if (url.hostname.split('.').some((label) => label === '')) faults.push('its host has an empty label');
  else if (url.origin !== origin) faults.push(`it reads as "${url.origin}": write it that way`);
  return faults;
}

/** Two spellings of one origin (`https://A.example`, `https://a.example:443`) count as the same. */
function originKey(origin: string): string {
  try {
    const url = new URL(origin);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.origin : origin;
  } catch {
    return origin;
  }
}

/** Credentials in a message would end up in terminals and CI logs; a user name may be a token too. */
function redactCredentials(origin: string): string {
  return origin.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#]*@/i, '$1***@');
}
