/**
 * `npm run lint:spec` on the contract's examples and Spectral: the repository's contract passes,
 * and a copy with an example that breaks its schema, an operation or parameter without one, a URL
 * the contract would refuse, or a Spectral warning, fails.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, test } from 'vitest';
import { parseDocument } from 'yaml';
import contract from '../../generated/openapi.json' with { type: 'json' };
import { repoRoot } from '../repo-root.ts';
import { asyncApiExampleProblems, openApiExampleProblems } from '../spec-examples.ts';

type Node = Record<string, unknown>;

const scratch = mkdtempSync(join(tmpdir(), 'svc-spec-lint-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

let copies = 0;
/** A fresh folder holding the contract and the lint configuration, as in the repository. */
function copyOfContract(): string {
  copies += 1;
  const root = join(scratch, `contract-${copies}`);
  for (const part of ['openapi', 'asyncapi', 'redocly.yaml', '.spectral.yaml']) {
    cpSync(join(repoRoot, part), join(root, part), { recursive: true });
  }
  return root;
}

function editYaml(root: string, file: string, edit: (doc: ReturnType<typeof parseDocument>) => void): void {
  const path = join(root, file);
  const doc = parseDocument(readFileSync(path, 'utf8'));
  edit(doc);
  writeFileSync(path, doc.toString());
}

/** The bundled contract, as a copy that a test may change. */
function bundled(): Node {
  return structuredClone(contract) as Node;
}

function lintCommand(script: string, root: string) {
  return spawnSync(process.execPath, ['--import', 'tsx', join(repoRoot, 'scripts', script), root], {
    cwd: repoRoot,
    encoding: 'utf8',
  });
}

describe('the OpenAPI examples', () => {
  test('when the repository contract is checked then every operation, parameter and body has a valid example', () => {
    assert.deepEqual(openApiExampleProblems(bundled()), []);
  });

  test('when an example breaks its own schema then it is reported where it is written', () => {
    const doc = bundled();
    const schemas = (doc.components as Node).schemas as Record<string, Node>;
    ((schemas.UploadUrlRequest as Node).examples as Node[])[0] = {
      ...((schemas.UploadUrlRequest as Node).examples as Node[])[0],
      sha256: 'not-a-hash',
    };
    const problems = openApiExampleProblems(doc);
    assert.deepEqual(
      problems.map((p) => p.pointer),
      ['/components/schemas/UploadUrlRequest/examples/0'],
    );
    assert.match(problems[0]?.message ?? '', /sha256 must match pattern/);
  });

  test('when an example has a value of the wrong format then it is reported: formats are checked', () => {
    const doc = bundled();
    const keyId = ((doc.components as Node).parameters as Record<string, Node>).KeyId as Node;
    keyId.example = 'key-1';
    const problems = openApiExampleProblems(doc);
    assert.deepEqual(
      problems.map((p) => [p.pointer, p.message]),
      [
        [
          '/components/parameters/KeyId/example',
          'the example does not match its schema: example must match format "uuid"',
        ],
      ],
    );
  });

  test('when a parameter, a request body or an answer shows no example then each is named', () => {
    const doc = bundled();
    const { parameters, schemas } = doc.components as {
      parameters: Record<string, Node>;
      schemas: Record<string, Node>;
    };
    delete (parameters.VersionId as Node).example;
    delete (schemas.SubmitRequest as Node).examples;
    delete (schemas.SshKeyList as Node).examples;
    const messages = openApiExampleProblems(doc).map((p) => p.message);
    assert.deepEqual(messages.sort(), [
      'parameter version_id has no example',
      'the 200 application/json answer of listSshKeys has no example',
      'the application/json request body of submitMiniApp has no example',
    ]);
  });

  test('when an example URL on the service calls an operation with a parameter it refuses then it is reported', () => {
    const doc = bundled();
    const uploadUrl = ((doc.components as Node).schemas as Record<string, Node>).UploadUrl as Node;
    const example = (uploadUrl.examples as Node[])[0] as Node;
    // The signature of the contract's first example, before it was fixed: not 43 base64url characters.
    example.upload_url = String(example.upload_url).replace(/signature=[^&]+/, 'signature=Zm9vYmFy');
    const problems = openApiExampleProblems(doc);
    assert.equal(problems.length, 1, JSON.stringify(problems));
    assert.equal(problems[0]?.pointer, '/components/schemas/UploadUrl/examples/0/upload_url');
    assert.match(
      problems[0]?.message ?? '',
      /uploadPackage: query signature "Zm9vYmFy": example must match pattern/,
    );

    example.upload_url = String(example.upload_url).replace('/uploads/', '/upload/');
    assert.match(openApiExampleProblems(doc)[0]?.message ?? '', /no path of the contract is \/upload\//);
  });
});

describe('the AsyncAPI examples', () => {
  async function parsed(root: string): Promise<Node> {
    const { fromFile, Parser } = await import('@asyncapi/parser');
    const { document } = await fromFile(new Parser(), join(root, 'asyncapi/asyncapi.yaml')).parse();
    assert.ok(document);
    return document.json() as Node;
  }

  test('when the repository contract is checked then every message has an example and all are valid', async () => {
    assert.deepEqual(asyncApiExampleProblems(await parsed(repoRoot)), []);
  });

  test("when a message's example or a schema's example breaks its schema then both are reported", async () => {
    const root = copyOfContract();
    editYaml(root, 'asyncapi/asyncapi.yaml', (doc) => {
      doc.setIn(['components', 'messages', 'carTelemetry', 'examples', 0, 'payload', 'battery_percent'], 140);
      doc.setIn(['components', 'schemas', 'CommandId', 'examples', 0], 'not-a-uuid');
    });
    const problems = asyncApiExampleProblems(await parsed(root));
    assert.deepEqual(
      problems.map((p) => p.pointer),
      ['/components/messages/carTelemetry/examples/0/payload', '/components/schemas/CommandId/examples/0'],
    );
    assert.match(problems[0]?.message ?? '', /battery_percent must be <= 100/);
  });
});

describe('npm run lint:spec', () => {
  test('when the repository contract is linted then Redocly, Spectral and the examples are clean', () => {
    const openapi = lintCommand('lint-openapi.ts', repoRoot);
    assert.equal(openapi.status, 0, openapi.stderr);
    assert.match(
      openapi.stdout,
      /spectral:oas clean \(0 errors, 0 warnings\), every example present and valid/,
    );
    const asyncapi = lintCommand('lint-asyncapi.ts', repoRoot);
    assert.equal(asyncapi.status, 0, asyncapi.stderr);
  });

  test('when an example of the contract fails its schema then the lint fails and says where', () => {
    const root = copyOfContract();
    editYaml(root, 'openapi/components/schemas/UploadUrlRequest.yaml', (doc) =>
      doc.setIn(['examples', 0, 'size'], -1),
    );
    const run = lintCommand('lint-openapi.ts', root);
    assert.equal(run.status, 1, run.stdout);
    assert.match(run.stderr, /example: the example does not match its schema: example\/size must be >= 1/);
    assert.match(run.stderr, /at #\/components\/schemas\/UploadUrlRequest\/examples\/0/);
  });

  test('when a message example of the AsyncAPI contract fails its schema then the lint fails', () => {
    const root = copyOfContract();
    editYaml(root, 'asyncapi/asyncapi.yaml', (doc) =>
      doc.setIn(['components', 'messages', 'carPresence', 'examples', 0, 'payload', 'state'], 'asleep'),
    );
    const run = lintCommand('lint-asyncapi.ts', root);
    assert.equal(run.status, 1, run.stdout);
    assert.match(run.stderr, /the example's payload does not match message carPresence/);
  });

  test('when an operation has no description then Spectral warns and that fails the lint', () => {
    const root = copyOfContract();
    editYaml(root, 'openapi/paths/api_v1_dev_me.yaml', (doc) => doc.deleteIn(['get', 'description']));
    const run = lintCommand('lint-openapi.ts', root);
    assert.equal(run.status, 1, run.stdout);
    assert.match(
      run.stderr,
      /spectral warning operation-description: .*\n {2}at #\/paths\/~1api~1v1~1dev~1me\/get\n/,
    );
    assert.match(run.stderr, /openapi\/: 1 problem\(s\)/);
  });
});
