/**
 * Request bodies that are a union of variants picked by one member (`oneOf` with a
 * `discriminator`), whose variant the service checks itself. The contract validator is shown only
 * their envelope: the members every variant has, each as wide as the variants together allow. A
 * body that fits no variant then reaches the service, which answers with its own problem in the
 * product's words (for a command: 422 `unknown_command`, or `invalid_command_args` naming the
 * argument), instead of the validator's 400 listing how the body fails each variant in turn.
 */
import type { OpenAPIV3 } from 'express-openapi-validator/dist/framework/types.js';
import { type OperationId, routes } from '../../../generated/routes.ts';

type Contract = OpenAPIV3.DocumentV3_1;
type Node = Record<string, unknown>;

const isNode = (value: unknown): value is Node =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function resolver(contract: Contract) {
  return (node: unknown): Node | undefined => {
    let at = node;
    for (let hops = 0; isNode(at) && typeof at.$ref === 'string' && hops < 32; hops += 1) {
      at = (at.$ref as string)
        .slice(2)
        .split('/')
        .reduce<unknown>((parent, key) => (isNode(parent) ? parent[key] : undefined), contract);
    }
    return isNode(at) ? at : undefined;
  };
}

/**
 * The envelope of a discriminated union of object schemas: an object with the members of any
 * variant, required where every variant requires them, closed where every variant is. A member
 * whose schema is the same in every variant that has it keeps that schema; one that differs (the
 * discriminator's `const`, each variant's `args`) keeps only the JSON type its schemas share.
 */
export function envelopeOf(union: Node, contract: Contract): Node {
  const resolve = resolver(contract);
  const variants = (Array.isArray(union.oneOf) ? union.oneOf : []).map(resolve);
  if (variants.length === 0 || !isNode(union.discriminator) || variants.some((v) => v?.type !== 'object')) {
    throw new Error('body-envelopes: the body is not a discriminated union of object schemas');
  }
  const objects = variants as Node[];
  const schemasOf = new Map<string, unknown[]>();
  for (const variant of objects) {
    for (const [name, schema] of Object.entries((variant.properties as Node | undefined) ?? {})) {
      schemasOf.set(name, [...(schemasOf.get(name) ?? []), schema]);
    }
  }
  const properties: Node = {};
  for (const [name, schemas] of schemasOf) {
    const [first] = schemas;
    if (schemas.every((schema) => JSON.stringify(schema) === JSON.stringify(first))) {
      properties[name] = first;
      continue;
    }
    const types = new Set(schemas.map((schema) => resolve(schema)?.type));
    const [type] = types;
    properties[name] = types.size === 1 && typeof type === 'string' ? { type } : {};
  }
  const requiredBy = (variant: Node) => (Array.isArray(variant.required) ? variant.required : []);
  const required = requiredBy(objects[0] as Node).filter((name) =>
    objects.every((variant) => requiredBy(variant).includes(name)),
  );
  return {
    type: 'object',
    ...(objects.every((variant) => variant.additionalProperties === false)
      ? { additionalProperties: false }
      : {}),
    ...(required.length > 0 ? { required } : {}),
    properties,
  };
}

/**
 * `contract` as the validator is to see it: the JSON body of each operation of `operationIds`
 * replaced by its envelope. The operations' services check the variants; the contract itself is
 * not changed.
 */
export function withBodyEnvelopes(contract: Contract, operationIds: readonly OperationId[]): Contract {
  const resolve = resolver(contract);
  const paths = { ...contract.paths } as Record<string, Node>;
  for (const operationId of operationIds) {
    const { openapiPath, method } = routes[operationId];
    const item = paths[openapiPath] as Node;
    const operation = item[method] as Node;
    const requestBody = resolve(operation.requestBody) as Node;
    const content = requestBody.content as Record<string, Node>;
    const union = resolve(content['application/json']?.schema);
    if (!union) throw new Error(`body-envelopes: ${operationId} has no JSON request body`);
    paths[openapiPath] = {
      ...item,
      [method]: {
        ...operation,
        requestBody: {
          ...requestBody,
          content: {
            ...content,
            'application/json': { ...content['application/json'], schema: envelopeOf(union, contract) },
          },
        },
      },
    };
  }
  return { ...contract, paths } as Contract;
}
