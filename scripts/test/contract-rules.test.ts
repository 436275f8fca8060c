/**
 * Rules every operation of the contract keeps, so that an integrator's generated client knows each
 * answer the service can give, and free text is one decision (the Text schemas), not one per field.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import asyncContract from '../../generated/asyncapi.json' with { type: 'json' };
import contract from '../../generated/openapi.json' with { type: 'json' };
import { multilineTextPattern, textPattern, versionPattern } from '../../generated/patterns.ts';

type Node = Record<string, unknown>;

interface Operation {
  id: string;
  method: string;
  path: string;
  responses: Node;
  hasBody: boolean;
  secured: boolean;
  tags: string[];
}

const methods = ['get', 'put', 'post', 'delete', 'patch'];

const operations: Operation[] = Object.entries(contract.paths as Record<string, Node>).flatMap(
  ([path, item]) =>
    methods
      .filter((method) => item[method])
      .map((method) => {
        const op = item[method] as Node;
        const security = (op.security ?? contract.security) as unknown[];
        return {
          id: String(op.operationId),
          method,
          path,
          responses: op.responses as Node,
          hasBody: op.requestBody !== undefined,
          secured: security.length > 0,
          tags: (op.tags ?? []) as string[],
        };
      }),
);

/** The statuses the service's own middleware can give any request, whatever the operation. */
function expectedStatuses(op: Operation): string[] {
  const statuses = ['400', '426']; // unknown query parameters; an svc older than 5.6.0
  if (op.id !== 'getHealth') statuses.push('503'); // the store unreachable or too slow
  if (op.secured) statuses.push('401');
  if (op.tags.includes('Admin')) statuses.push('403');
  if (op.hasBody) statuses.push('408', '413', '415', '422'); // 408: a body too slow to arrive
  return statuses;
}

describe('the contract', () => {
  test('when it is read then it has operations to check', () => {
    assert.ok(operations.length > 20, `${operations.length} operations`);
  });

  for (const op of operations) {
    test(`when ${op.id} (${op.method.toUpperCase()} ${op.path}) is called then every answer the service can give is documented`, () => {
      const missing = expectedStatuses(op).filter((status) => !(status in op.responses));
      assert.deepEqual(missing, [], `${op.id} lacks responses ${missing.join(', ')}`);
    });
  }

  test('when a request body has free text then it is a Text or MultilineText, never a bare string', () => {
    const schemas = contract.components.schemas as Record<string, Node>;
    const bare: string[] = [];
    const visit = (schema: Node | undefined, at: string): void => {
      if (!schema) return;
      if (typeof schema.$ref === 'string') {
        const name = schema.$ref.split('/').at(-1) ?? '';
        // Device ids have no pattern on purpose: the service checks them, with their own 422 codes.
        if (name !== 'DeviceId') visit(schemas[name], at);
        return;
      }
      if (((schema.allOf ?? []) as Node[]).some((part) => part.$ref)) return; // a shared rule
      for (const [name, property] of Object.entries((schema.properties ?? {}) as Record<string, Node>)) {
        visit(property, `${at}.${name}`);
      }
      if (schema.items) visit(schema.items as Node, `${at}[]`);
      for (const member of [...((schema.oneOf ?? []) as Node[]), ...((schema.anyOf ?? []) as Node[])]) {
        visit(member, at);
      }
      const constrained = schema.pattern || schema.format || schema.enum || schema.const;
      if (schema.type === 'string' && !constrained) bare.push(at);
    };
    for (const [path, item] of Object.entries(contract.paths as Record<string, Node>)) {
      for (const method of methods) {
        const body = ((item[method] as Node | undefined)?.requestBody as Node | undefined)?.content as
          | Record<string, { schema?: Node }>
          | undefined;
        visit(body?.['application/json']?.schema, `${method.toUpperCase()} ${path}`);
      }
    }
    assert.deepEqual(bare, [], 'free-text fields that do not use the Text schemas');
  });

  test('when a request body has a member with a default then no client makes it required: no request schema says `default`', () => {
    // openapi-typescript (defaultNonNullable, its default) types a member with a `default` in a
    // component schema as required, so `{"name":"doors.lock"}` would not type-check against
    // CommandRequest. The default of a request member is said in its description instead.
    const schemas = contract.components.schemas as Record<string, Node>;
    const withDefault: string[] = [];
    const seen = new Set<Node>();
    const visit = (schema: unknown, at: string): void => {
      if (typeof schema !== 'object' || schema === null || seen.has(schema as Node)) return;
      const node = schema as Node;
      seen.add(node);
      if (typeof node.$ref === 'string') {
        const name = node.$ref.split('/').at(-1) ?? '';
        visit(schemas[name], name);
        return;
      }
      if ('default' in node) withDefault.push(at);
      for (const [name, property] of Object.entries((node.properties ?? {}) as Node)) {
        visit(property, `${at}.${name}`);
      }
      for (const key of ['oneOf', 'anyOf', 'allOf'] as const) {
        for (const member of (node[key] ?? []) as Node[]) visit(member, at);
      }
      visit(node.items, `${at}[]`);
      visit(node.additionalProperties, `${at}{}`);
    };
    for (const [path, item] of Object.entries(contract.paths as Record<string, Node>)) {
      for (const method of methods) {
        const body = ((item[method] as Node | undefined)?.requestBody as Node | undefined)?.content as
          | Record<string, { schema?: Node }>
          | undefined;
        visit(body?.['application/json']?.schema, `${method.toUpperCase()} ${path}`);
      }
    }
    assert.ok(seen.size > 50, `only ${seen.size} request schemas seen`);
    assert.deepEqual(withDefault, [], 'request schemas with a default');
  });

  test("when a caller sends a command then its name and arguments are those of the car's cmd payload, version of app.install aside", () => {
    const schemas = contract.components.schemas as Record<string, Node>;
    const carSchemas = asyncContract.components.schemas as Record<string, Node>;
    const resolveIn = (all: Record<string, Node>, node: Node): Node =>
      typeof node.$ref === 'string' ? resolveIn(all, all[node.$ref.split('/').at(-1) ?? ''] as Node) : node;
    // What a schema accepts, its refs resolved, without the words about it.
    const rules = (all: Record<string, Node>, node: Node): unknown => {
      const resolved = resolveIn(all, node);
      return Object.fromEntries(
        Object.entries(resolved)
          .filter(([key]) => !['title', 'description', 'examples'].includes(key))
          .map(([key, value]) => [
            key,
            key === 'properties'
              ? Object.fromEntries(
                  Object.entries(value as Record<string, Node>).map(([name, member]) => [
                    name,
                    rules(all, member),
                  ]),
                )
              : value,
          ]),
      );
    };
    const byName = (all: Record<string, Node>, union: Node) =>
      new Map(
        ((union.oneOf ?? []) as Node[]).map((variant) => {
          const properties = resolveIn(all, variant).properties as Record<string, Node>;
          return [String(properties.name?.const), properties.args as Node] as const;
        }),
      );
    const request = byName(schemas, schemas.CommandRequest as Node);
    const car = byName(carSchemas, carSchemas.CarCommand as Node);
    assert.deepEqual(
      [...request.keys()],
      [...car.keys()].filter((name) => name !== 'pairing.show_code'),
      'the names a caller may send: every command but the one only the service sends',
    );
    assert.deepEqual(
      (schemas.CommandName as Node).enum,
      [...car.keys()],
      'the names a command may have, in the answers',
    );
    const mapping = (schemas.CommandRequest as { discriminator: { mapping: Record<string, string> } })
      .discriminator.mapping;
    for (const [name, args] of request) {
      const carArgs = rules(carSchemas, car.get(name) as Node) as Node;
      const expected =
        name === 'app.install'
          ? { ...carArgs, required: (carArgs.required as string[]).filter((member) => member !== 'version') }
          : carArgs;
      assert.deepEqual(rules(schemas, args), expected, name);
      assert.equal(
        mapping[name],
        ((schemas.CommandRequest as Node).oneOf as Node[]).find(
          (variant) => (resolveIn(schemas, variant).properties as Record<string, Node>).name?.const === name,
        )?.$ref,
        `the discriminator maps ${name} to its own variant`,
      );
    }
  });

  test('when text holds a control character then the shared text patterns refuse it, and keep everything else', () => {
    for (const good of ['Ada Lovelace', 'Zoë 😀 日本', '']) {
      assert.ok(textPattern.test(good), good);
      assert.ok(multilineTextPattern.test(good), good);
    }
    for (const bad of ['a\u0000b', 'a\u0007b', 'a\u001bb', 'a\u007fb', 'a\u0085b']) {
      assert.ok(!textPattern.test(bad), JSON.stringify(bad));
      assert.ok(!multilineTextPattern.test(bad), JSON.stringify(bad));
    }
    assert.ok(!textPattern.test('two\nlines'));
    assert.ok(multilineTextPattern.test('two\nlines\r\nand\ta tab'));
  });

  test('when a version has a leading zero in a numeric identifier then the Version pattern refuses it', () => {
    for (const good of ['1.0.0', '1.0.0-0', '1.0.0-0a1', '1.0.0-rc.1+build.01', '10.20.30-alpha.beta']) {
      assert.ok(versionPattern.test(good), good);
    }
    for (const bad of ['1.0.0-01', '01.0.0', '1.02.0', '1.0.0-rc.007', 'v1.0.0', '1.0', '1.0.0-']) {
      assert.ok(!versionPattern.test(bad), bad);
    }
  });
});
