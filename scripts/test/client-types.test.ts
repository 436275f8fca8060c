/**
 * What an integrator copies from the docs compiles against a client they generate from the
 * contract alone. Clients are generated from generated/openapi.json with each tool's default
 * options, openapi-typescript (with openapi-fetch) and @hey-api/openapi-ts, once per run into a
 * temporary folder; every JSON request body README.md and docs/ show (read from the pages by
 * scripts/doc-request-examples.ts, so that pages and test cannot drift) is passed to the
 * operation's generated request type and to the generated client's call, and `tsc --strict` must
 * accept each. Mistakes the contract refuses (a misspelt command, another command's arguments)
 * must not compile.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from 'vitest';
import contract from '../../generated/openapi.json' with { type: 'json' };
import { type DocRequestExample, docRequestExamples, shellValue } from '../doc-request-examples.ts';
import { repoRoot } from '../repo-root.ts';

type Node = Record<string, unknown>;

/** Bodies no client should let through: each is a mistake the service would answer with a 422. */
const refused: { why: string; operationId: string; body: unknown }[] = [
  { why: 'a misspelt command', operationId: 'createCarCommand', body: { name: 'doors.lok' } },
  {
    why: "another command's arguments",
    operationId: 'createCarCommand',
    body: { name: 'doors.lock', args: { app_id: 'com.example.hello-car' } },
  },
  {
    why: 'app.install without its arguments',
    operationId: 'createCarCommand',
    body: { name: 'app.install' },
  },
  {
    why: 'app.install without app_id',
    operationId: 'createCarCommand',
    body: { name: 'app.install', args: { version: '1.0.0' } },
  },
  {
    why: 'app.uninstall without app_id',
    operationId: 'createCarCommand',
    body: { name: 'app.uninstall', args: {} },
  },
  {
    why: 'an argument no command takes',
    operationId: 'createCarCommand',
    body: { name: 'app.uninstall', args: { app_id: 'com.example.hello-car', force: true } },
  },
];

/** The requests the pages must go on showing, so that the reading of them cannot quietly stop. */
const expected: { operationId: string; body: Node }[] = [
  { operationId: 'createCarCommand', body: { name: 'doors.lock' } },
  { operationId: 'createCarCommand', body: { name: 'doors.unlock' } },
  {
    operationId: 'createCarCommand',
    body: { name: 'app.install', args: { app_id: 'com.example.hello-car', version: '1.0.0' } },
  },
  {
    operationId: 'createCarCommand',
    body: { name: 'app.install', args: { app_id: 'com.example.hello-car' } },
  },
  { operationId: 'createCarCommand', body: { name: 'app.uninstall' } },
  { operationId: 'pairCar', body: { code: '40172958' } },
  { operationId: 'transferCar', body: {} },
  { operationId: 'createUploadUrl', body: {} },
  { operationId: 'submitMiniApp', body: {} },
  { operationId: 'signUp', body: {} },
  { operationId: 'createSession', body: {} },
];

function run(
  command: string,
  args: string[],
  cwd: string,
): Promise<{ status: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    child.stderr.on('data', (chunk) => {
      output += chunk;
    });
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, output }));
  });
}

/** The body as TypeScript on one line (tsc then reports any fault of it on that line). */
function literal(value: unknown): string {
  if (value === shellValue) return 'shellValue';
  if (Array.isArray(value)) return `[${value.map(literal).join(', ')}]`;
  if (value !== null && typeof value === 'object') {
    return `{ ${Object.entries(value)
      .map(([key, member]) => `${JSON.stringify(key)}: ${literal(member)}`)
      .join(', ')} }`;
  }
  return JSON.stringify(value);
}

const pascal = (operationId: string) => operationId.charAt(0).toUpperCase() + operationId.slice(1);

function operationPath(operationId: string): { path: string; method: string } {
  for (const [path, item] of Object.entries(contract.paths as Record<string, Node>)) {
    for (const [method, operation] of Object.entries(item)) {
      if ((operation as Node)?.operationId === operationId) return { path, method: method.toUpperCase() };
    }
  }
  throw new Error(`no operation ${operationId}`);
}

/** `{ path: { device_id: '…' } }` for a path with parameters; the values do not matter to types. */
function pathParams(path: string): Record<string, string> {
  return Object.fromEntries([...path.matchAll(/\{([^}]+)\}/g)].map(([, name]) => [name as string, 'x']));
}

interface Line {
  /** What the line checks, for the failure message. */
  what: string;
  /** Whether tsc must accept it. */
  accepted: boolean;
}

/**
 * One file per tool: each body passed to the operation's request type, then to the generated
 * client's call. `lines` says, by line number, what each line is.
 */
function checkFiles(cases: { what: string; accepted: boolean; operationId: string; body: unknown }[]) {
  const openapiTypescript = [
    "import createClient from 'openapi-fetch';",
    "import type { operations, paths } from './openapi-typescript/schema.js';",
    "type Body<K extends keyof operations> = NonNullable<operations[K]['requestBody']> extends { content: { 'application/json': infer B } } ? B : never;",
    '/** A value the shell fills in, which the page does not say. */',
    'declare const shellValue: never;',
    "const client = createClient<paths>({ baseUrl: 'http://127.0.0.1:8080' });",
  ];
  const heyApi = [
    "import * as sdk from './hey-api/sdk.gen.js';",
    "import type * as types from './hey-api/types.gen.js';",
    "type Body<Data extends { body?: unknown }> = NonNullable<Data['body']>;",
    'declare const shellValue: never;',
  ];
  const lines: Record<string, Map<number, Line>> = {
    'openapi-typescript.ts': new Map(),
    'hey-api.ts': new Map(),
  };
  const add = (file: string[], name: string, text: string, line: Line) => {
    file.push(text);
    lines[name]?.set(file.length, line);
  };
  cases.forEach(({ what, accepted, operationId, body }, index) => {
    const { path, method } = operationPath(operationId);
    const params = pathParams(path);
    const hasParams = Object.keys(params).length > 0;
    const value = literal(body);
    add(
      openapiTypescript,
      'openapi-typescript.ts',
      `export const body${index}: Body<'${operationId}'> = ${value};`,
      {
        what: `${what}, as openapi-typescript's request type`,
        accepted,
      },
    );
    add(
      openapiTypescript,
      'openapi-typescript.ts',
      `void client.${method}('${path}', { ${hasParams ? `params: { path: ${literal(params)} }, ` : ''}body: ${value} });`,
      { what: `${what}, passed to openapi-fetch`, accepted },
    );
    add(
      heyApi,
      'hey-api.ts',
      `export const body${index}: Body<types.${pascal(operationId)}Data> = ${value};`,
      {
        what: `${what}, as @hey-api/openapi-ts's request type`,
        accepted,
      },
    );
    add(
      heyApi,
      'hey-api.ts',
      `void sdk.${operationId}({ ${hasParams ? `path: ${literal(params)}, ` : ''}body: ${value} });`,
      { what: `${what}, passed to @hey-api/openapi-ts's client`, accepted },
    );
  });
  return {
    files: { 'openapi-typescript.ts': openapiTypescript.join('\n'), 'hey-api.ts': heyApi.join('\n') },
    lines,
  };
}

describe('the JSON requests the docs show, in clients generated from the contract', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'svc-client-types-'));
  const examples: DocRequestExample[] = docRequestExamples(repoRoot, contract as Node);
  let diagnostics: { file: string; line: number; message: string }[] = [];
  let lines: Record<string, Map<number, Line>> = {};

  beforeAll(async () => {
    const input = join(repoRoot, 'generated/openapi.json');
    mkdirSync(join(scratch, 'openapi-typescript'));
    // Each tool as an integrator runs it: its command, the contract, no options; one run each.
    const generated = await Promise.all([
      run(
        process.execPath,
        [
          join(repoRoot, 'node_modules/openapi-typescript/bin/cli.js'),
          input,
          '--output',
          join(scratch, 'openapi-typescript/schema.ts'),
        ],
        scratch,
      ),
      run(
        process.execPath,
        [
          join(repoRoot, 'node_modules/@hey-api/openapi-ts/bin/run.js'),
          '--input',
          input,
          '--output',
          join(scratch, 'hey-api'),
        ],
        scratch,
      ),
    ]);
    for (const { status, output } of generated) assert.equal(status, 0, output);

    const checks = checkFiles([
      ...examples.map((example) => ({
        what: `${example.source} (${example.operationId})`,
        accepted: true,
        operationId: example.operationId,
        body: example.body,
      })),
      ...refused.map(({ why, operationId, body }) => ({
        what: `${why}: ${JSON.stringify(body)}`,
        accepted: false,
        operationId,
        body,
      })),
    ]);
    lines = checks.lines;
    for (const [name, text] of Object.entries(checks.files)) writeFileSync(join(scratch, name), `${text}\n`);
    // openapi-fetch from this repository, as the integrator's own node_modules would hold it.
    symlinkSync(join(repoRoot, 'node_modules'), join(scratch, 'node_modules'), 'dir');
    writeFileSync(join(scratch, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    writeFileSync(
      join(scratch, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          lib: ['ES2022', 'DOM', 'DOM.Iterable'],
          types: [],
          skipLibCheck: true,
          // A generated client whose parts go unused is no fault of the examples.
          noUnusedLocals: false,
        },
        files: Object.keys(checks.files),
      }),
    );
    const checked = await run(
      process.execPath,
      [join(repoRoot, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json', '--pretty', 'false'],
      scratch,
    );
    diagnostics = [...checked.output.matchAll(/^([^\s(]+)\((\d+),\d+\): error (.*)$/gm)].map(
      ([, file, line, message]) => ({ file: file as string, line: Number(line), message: message as string }),
    );
    // Anything tsc said that is not tied to a line of the two files is a fault of the setup.
    const unplaced = checked.output
      .split('\n')
      .filter((line) => /error TS/.test(line) && !/^(openapi-typescript|hey-api)\.ts\(/.test(line));
    assert.deepEqual(unplaced, [], checked.output);
  });

  afterAll(() => {
    rmSync(scratch, { recursive: true, force: true });
  });

  test('when the pages are read then the requests they show are found, each matched to its operation', () => {
    for (const { operationId, body } of expected) {
      const found = examples.some(
        (example) =>
          example.operationId === operationId &&
          Object.entries(body).every(
            ([key, value]) =>
              JSON.stringify((example.body as Node | undefined)?.[key]) === JSON.stringify(value),
          ),
      );
      assert.ok(found, `the pages show ${operationId} ${JSON.stringify(body)}`);
    }
  });

  test('when every request the pages show is type-checked against both generated clients then each compiles', () => {
    const faults = diagnostics
      .map((diagnostic) => ({ ...diagnostic, line: lines[diagnostic.file]?.get(diagnostic.line) }))
      .filter(({ line }) => line?.accepted !== false)
      .map(({ file, line, message }) => `${line?.what ?? `${file}: a line of the setup`}: ${message}`);
    assert.deepEqual(faults, []);
    assert.ok(examples.length >= 15, `only ${examples.length} requests found`);
  });

  test('when a mistake the contract refuses is type-checked then neither generated client lets it compile', () => {
    const failing = new Set(diagnostics.map(({ file, line }) => `${file}:${line}`));
    const compiled = Object.entries(lines).flatMap(([file, byLine]) =>
      [...byLine]
        .filter(([line, { accepted }]) => !accepted && !failing.has(`${file}:${line}`))
        .map(([, { what }]) => what),
    );
    assert.deepEqual(compiled, []);
  });
});
