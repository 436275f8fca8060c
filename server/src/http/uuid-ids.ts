/**
 * Ids in the service's UUID grammar (client/src/uuid.ts) come in either case and are used in lower
 * case: each path parameter and body field the contract types `format: uuid` is lower-cased once
 * the validator has passed it, so that the store, logs, idempotency keys and answers all see one
 * spelling of an id.
 */
import type { RequestHandler } from 'express';
import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types.js';

type Contract = OpenAPIV3.DocumentV3_1;
type Node = Record<string, unknown>;

/** Where an operation takes UUIDs: path parameter names, and body fields as paths of member names. */
export interface UuidPlaces {
  params: string[];
  body: string[][];
}

/** The UUIDs of the operation at `openapiPath` and `method`, from the contract. */
export function uuidPlaces(contract: Contract, openapiPath: string, method: string): UuidPlaces {
  const resolve = (node: unknown): Node | undefined => {
    let at = node as Node | undefined;
    for (let hops = 0; typeof at?.$ref === 'string' && hops < 32; hops += 1) {
      at = (at.$ref as string)
        .slice(2)
        .split('/')
        .reduce<unknown>((parent, key) => (parent as Node | undefined)?.[key], contract) as Node | undefined;
    }
    return at;
  };
  const isUuid = (schema: unknown) => resolve(schema)?.format === 'uuid';
  const item = resolve(contract.paths?.[openapiPath]) ?? {};
  const operation = resolve(item[method]) ?? {};
  const parameters = [
    ...((item.parameters as unknown[]) ?? []),
    ...((operation.parameters as unknown[]) ?? []),
  ]
    .map(resolve)
    .filter((parameter) => parameter?.in === 'path' && isUuid(parameter.schema));
  const body: string[][] = [];
  const content = resolve(operation.requestBody)?.content as Node | undefined;
  const schema = resolve((content?.['application/json'] as Node | undefined)?.schema);
  // Members of objects only (the contract has no arrays of ids in a request); bounded by depth.
  const walk = (node: Node | undefined, at: string[]) => {
    if (!node || at.length > 8) return;
    for (const [name, member] of Object.entries((node.properties as Node | undefined) ?? {})) {
      if (isUuid(member)) body.push([...at, name]);
      else walk(resolve(member), [...at, name]);
    }
  };
  walk(schema, []);
  return { params: parameters.map((parameter) => String(parameter?.name)), body };
}

/** Lower-cases the UUIDs at `places` in a request the validator has passed; none when there are none. */
export function lowerCaseUuids(places: UuidPlaces): RequestHandler[] {
  if (places.params.length === 0 && places.body.length === 0) return [];
  return [
    (req, _res, next) => {
      for (const name of places.params) {
        const value = req.params[name];
        if (typeof value === 'string') req.params[name] = value.toLowerCase();
      }
      for (const path of places.body) {
        const parent = path
          .slice(0, -1)
          .reduce<unknown>((node, key) => (node as Node | undefined)?.[key], req.body);
        const name = path.at(-1) as string;
        if (parent && typeof parent === 'object' && typeof (parent as Node)[name] === 'string') {
          (parent as Node)[name] = ((parent as Node)[name] as string).toLowerCase();
        }
      }
      next();
    },
  ];
}
