/** generated/routes.ts: operationId -> HTTP method, Express path and security, from the bundled contract. */
import { banner } from './banner.ts';
import type { OpenApiDocument } from './openapi-bundle.ts';

const methods = ['get', 'put', 'post', 'delete', 'patch'] as const;

/** Operations with this tag are for admins only: the service checks the caller before anything else. */
const adminTag = 'Admin';

interface RouteEntry {
  operationId: string;
  method: (typeof methods)[number];
  openapiPath: string;
  expressPath: string;
  security: string[];
  adminOnly: boolean;
}

/** `/cars/{device_id}/pair` -> `/cars/:device_id/pair` (path-to-regexp 8, as Express 5 reads it). */
export function toExpressPath(openapiPath: string): string {
  return openapiPath.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, ':$1');
}

/** Literal segments sort before parameters so that `/mini-apps/mine` is never taken for an id. */
function specificity(path: string): string {
  return path
    .split('/')
    .map((segment) => (segment.startsWith('{') ? `~${segment}` : segment))
    .join('/');
}

function securityOf(operation: { security?: Record<string, unknown>[] }, doc: OpenApiDocument): string[] {
  const requirements = operation.security ?? (doc.security as Record<string, unknown>[] | undefined) ?? [];
  return [...new Set(requirements.flatMap((r) => Object.keys(r)))].sort();
}

export function collectRoutes(doc: OpenApiDocument): RouteEntry[] {
  const entries: RouteEntry[] = [];
  const seen = new Set<string>();
  for (const [openapiPath, item] of Object.entries(doc.paths)) {
    for (const method of methods) {
      const operation = item[method] as
        | { operationId?: string; security?: Record<string, unknown>[]; tags?: string[] }
        | undefined;
      if (!operation) continue;
      const { operationId } = operation;
      if (!operationId) throw new Error(`openapi: ${method.toUpperCase()} ${openapiPath} has no operationId`);
      if (seen.has(operationId)) throw new Error(`openapi: operationId ${operationId} is used twice`);
      seen.add(operationId);
      entries.push({
        operationId,
        method,
        openapiPath,
        expressPath: toExpressPath(openapiPath),
        security: securityOf(operation, doc),
        adminOnly: operation.tags?.includes(adminTag) ?? false,
      });
    }
  }
  return entries.sort(
    (a, b) =>
      specificity(a.openapiPath).localeCompare(specificity(b.openapiPath)) ||
      a.method.localeCompare(b.method),
  );
}

export function generateRoutes(doc: OpenApiDocument): string {
  const entries = collectRoutes(doc);
  const lines = [
    banner('openapi/ (bundled)'),
    'export interface Route {',
    "  readonly method: 'get' | 'put' | 'post' | 'delete' | 'patch';",
    '  /** The path as the contract writes it, e.g. `/api/v1/cars/{device_id}/pair`. */',
    '  readonly openapiPath: string;',
    '  /** The same path as Express 5 reads it, e.g. `/api/v1/cars/:device_id/pair`. */',
    '  readonly expressPath: string;',
    '  /** Names of the security schemes that may authorize the call; empty when it needs none. */',
    '  readonly security: readonly string[];',
    '  /** Tagged `Admin` in the contract: anyone else gets 403 before the request is looked at. */',
    '  readonly adminOnly: boolean;',
    '}',
    '',
    '/** Every operation of the contract, most specific path first (the order to register them in). */',
    'export const routes = {',
    ...entries.map(
      (e) =>
        `  ${e.operationId}: { method: '${e.method}', openapiPath: '${e.openapiPath}', expressPath: '${e.expressPath}', security: [${e.security.map((s) => `'${s}'`).join(', ')}], adminOnly: ${e.adminOnly} },`,
    ),
    '} as const satisfies Record<string, Route>;',
    '',
    'export type OperationId = keyof typeof routes;',
    '',
  ];
  return lines.join('\n');
}
