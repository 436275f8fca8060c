import assert from 'node:assert/strict';
import { join } from 'node:path';
import ts from 'typescript';
import { beforeAll, describe, test } from 'vitest';

// Compiles each fixture with the repository's own compiler options and reads the diagnostics,
// so the claim "a wrong handler does not compile" is checked, not assumed.
const fixtures = join(import.meta.dirname, 'fixtures/typed-handlers');

function compilerOptions(): ts.CompilerOptions {
  const configPath = join(import.meta.dirname, '../../tsconfig.json');
  const config = ts.readConfigFile(configPath, (path) => ts.sys.readFile(path));
  return ts.parseJsonConfigFileContent(config.config, ts.sys, join(configPath, '..')).options;
}

const cases = [
  { fixture: 'complete.ts', errors: [] as string[] },
  { fixture: 'missing-handler.ts', errors: ["Property 'getMe' is missing"] },
  {
    fixture: 'wrong-body.ts',
    errors: ['Type \'number\' is not assignable to type \'"ok" | "ready" | "degraded" | "not_ready"\''],
  },
  { fixture: 'wrong-status.ts', errors: ["Type '201' is not assignable to type"] },
  { fixture: 'unknown-operation.ts', errors: ["'notInTheContract' does not exist in type 'Handlers'"] },
  { fixture: 'wrong-request.ts', errors: ["Property 'key' does not exist"] },
];

describe('typed handlers', () => {
  const messages = new Map<string, string[]>();

  beforeAll(() => {
    const files = cases.map((c) => join(fixtures, c.fixture));
    const program = ts.createProgram(files, compilerOptions());
    for (const c of cases) {
      const source = program.getSourceFile(join(fixtures, c.fixture));
      assert.ok(source, `fixture ${c.fixture} was not compiled`);
      const diagnostics = [
        ...program.getSyntacticDiagnostics(source),
        ...program.getSemanticDiagnostics(source),
      ];
      messages.set(
        c.fixture,
        diagnostics.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')),
      );
    }
  });

  for (const c of cases) {
    const expectation = c.errors.length === 0 ? 'compiles' : 'fails to compile';
    test(`when a handler module is ${c.fixture.replace('.ts', '')} then it ${expectation}`, () => {
      const found = messages.get(c.fixture) ?? [];
      if (c.errors.length === 0) {
        assert.deepEqual(found, []);
        return;
      }
      for (const expected of c.errors) {
        assert.ok(
          found.some((message) => message.includes(expected)),
          `expected an error containing ${JSON.stringify(expected)}, got:\n${found.join('\n')}`,
        );
      }
    });
  }
});
