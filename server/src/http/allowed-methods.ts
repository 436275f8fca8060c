/**
 * Which methods each path of the contract takes, from generated/routes.ts: what `Allow` (on a 405
 * and on OPTIONS) and a CORS preflight's `Access-Control-Allow-Methods` say.
 */
import { routes } from '../../../generated/routes.ts';

export interface PathMethods {
  /** The path as the contract writes it (a metric label), e.g. `/api/v1/dev/keys/{key_id}`. */
  openapiPath: string;
  /** The methods of its operations, upper-case, and HEAD wherever GET: Express answers HEAD from the GET route. */
  methods: string[];
}

/** Every path of the contract by its Express path, most specific first (the order to register them in). */
export function methodsByPath(): Map<string, PathMethods> {
  const byPath = new Map<string, PathMethods>();
  for (const route of Object.values(routes)) {
    const entry = byPath.get(route.expressPath) ?? { openapiPath: route.openapiPath, methods: [] };
    entry.methods.push(route.method.toUpperCase());
    if (route.method === 'get') entry.methods.push('HEAD');
    byPath.set(route.expressPath, entry);
  }
  return byPath;
}

/** `Allow` for a path taking `methods`: those, and OPTIONS, which every path answers. */
export function allowHeader(methods: readonly string[]): string {
  return [...methods, 'OPTIONS'].join(', ');
}
