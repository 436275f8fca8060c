/**
 * Rules every operation of the contract keeps, so that an integrator's generated client knows each
 * answer the service can give, and free text is one decision (the Text schemas), not one per field.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
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
