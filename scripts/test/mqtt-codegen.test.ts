/** asyncapi/ lint and generated/mqtt.ts: topics round-trip, malformed topics are refused, QoS follows the contract. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, test } from 'vitest';
import { parseDocument } from 'yaml';
import { generateMqtt } from '../codegen/mqtt.ts';
import { isFailing, lintAsyncApi } from '../lint-asyncapi.ts';
import { repoRoot } from '../repo-root.ts';

/** The part of generated/mqtt.ts these tests call; the file itself may not be generated yet. */
interface MqttModule {
  carTopicSuffixes: readonly string[];
  carTopic(brand: string, nativeId: string, suffix: string): string;
  parseCarTopic(topic: string): { brand: string; nativeId: string; suffix: string } | undefined;
  carTopicFilter(suffix: string, brand?: string): string;
  carTopicQos: Readonly<Record<string, number>>;
  carTopicRetain: Readonly<Record<string, boolean>>;
  serviceSends: readonly string[];
  serviceReceives: readonly string[];
}

const asyncapiPath = join(repoRoot, 'asyncapi/asyncapi.yaml');
const scratch = mkdtempSync(join(tmpdir(), 'svc-mqtt-codegen-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

let counter = 0;
/** A fresh folder holding asyncapi/ and the openapi/ schemas it references, as in the repository. */
function copyOfContract(): string {
  counter += 1;
  const root = join(scratch, `contract-${counter}`);
  cpSync(join(repoRoot, 'asyncapi'), join(root, 'asyncapi'), { recursive: true });
  cpSync(join(repoRoot, 'openapi/components/schemas'), join(root, 'openapi/components/schemas'), {
    recursive: true,
  });
  return root;
}

function editDocument(root: string, edit: (doc: ReturnType<typeof parseDocument>) => void): string {
  const path = join(root, 'asyncapi/asyncapi.yaml');
  const doc = parseDocument(readFileSync(path, 'utf8'));
  edit(doc);
  writeFileSync(path, doc.toString());
  return path;
}

async function loadGenerated(): Promise<{ dir: string; module: MqttModule }> {
  const dir = join(scratch, 'generated');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
  writeFileSync(join(dir, 'mqtt.ts'), await generateMqtt(asyncapiPath));
  return { dir, module: (await import(pathToFileURL(join(dir, 'mqtt.ts')).href)) as MqttModule };
}

const suffixes = ['cmd', 'cmd/ack', 'status', 'telemetry', 'presence'];

test('when generated twice from the same contract then the text is byte-identical and path-free', async () => {
  const first = await generateMqtt(asyncapiPath);
  const second = await generateMqtt(asyncapiPath);
  assert.equal(first, second);
  assert.ok(first.startsWith('// DO NOT EDIT.'));
  assert.ok(!first.includes(repoRoot), 'the generated text names no absolute path');
  assert.match(
    first,
    /export const carTopicSuffixes = \['cmd', 'cmd\/ack', 'status', 'telemetry', 'presence'\] as const;/,
  );
});

test('when a topic is built for each suffix then parsing it gives back brand, native id and suffix', async () => {
  const { module: mqtt } = await loadGenerated();
  assert.deepEqual(mqtt.carTopicSuffixes, suffixes);
  for (const suffix of suffixes) {
    const topic = mqtt.carTopic('brand_a', '1HGCM82633A004352', suffix);
    assert.equal(topic, `cars/brand_a/1HGCM82633A004352/${suffix}`);
    assert.deepEqual(mqtt.parseCarTopic(topic), { brand: 'brand_a', nativeId: '1HGCM82633A004352', suffix });
  }
});

test('when a topic is malformed then parseCarTopic refuses it', async () => {
  const { module: mqtt } = await loadGenerated();
  for (const topic of [
    'cars/brand_a/X/unknown',
    'cars/brand_a//status',
    'car/brand_a/X/status',
    'cars/brand_a/X/status/extra',
    'cars/brand_a/X',
    'cars//X/status',
    '/cars/brand_a/X/status',
    'cars/+/X/status',
    'cars/brand_a/#',
    '',
  ]) {
    assert.equal(mqtt.parseCarTopic(topic), undefined, topic);
  }
});

test('when the service subscribes then the filters cover every car, or every car of one brand', async () => {
  const { module: mqtt } = await loadGenerated();
  assert.equal(mqtt.carTopicFilter('status'), 'cars/+/+/status');
  assert.equal(mqtt.carTopicFilter('cmd/ack'), 'cars/+/+/cmd/ack');
  assert.equal(mqtt.carTopicFilter('telemetry', 'brand_b'), 'cars/brand_b/+/telemetry');
});

test('when the contract binds QoS and retain then the generated tables and directions follow it', async () => {
  const { module: mqtt } = await loadGenerated();
  assert.deepEqual(mqtt.carTopicQos, { cmd: 1, 'cmd/ack': 1, status: 1, telemetry: 0, presence: 1 });
  assert.deepEqual(mqtt.carTopicRetain, {
    cmd: false,
    'cmd/ack': false,
    status: true,
    telemetry: false,
    presence: true,
  });
  assert.deepEqual(mqtt.serviceSends, ['cmd']);
  assert.deepEqual(mqtt.serviceReceives, ['cmd/ack', 'status', 'telemetry', 'presence']);
});

test('when payload types are used then brand is the Brand union and the module type-checks strictly', async () => {
  const { dir } = await loadGenerated();
  writeFileSync(
    join(dir, 'use.ts'),
    [
      "import type { CarPresence, CarTopicPayloads } from './mqtt.ts';",
      'export const presence: CarPresence = {',
      "  device_id: 'brand_a:1HGCM82633A004352',",
      "  brand: 'brand_a',",
      "  state: 'online',",
      "  at: '2025-03-14T09:26:53Z',",
      '};',
      "export const ack: CarTopicPayloads['cmd/ack'] = {",
      "  command_id: '0b8e7c1e-3f5a-4c2d-9a41-6f0d2b7c9e15',",
      "  device_id: 'brand_a:1HGCM82633A004352',",
      "  brand: 'brand_a',",
      "  outcome: 'completed',",
      "  at: '2025-03-14T09:26:55Z',",
      '};',
      '// @ts-expect-error an unknown brand is not a Brand',
      "export const unknownBrand: CarPresence = { ...presence, brand: 'brand_z' };",
      '// @ts-expect-error payloads allow no other fields',
      "export const extra: CarPresence = { ...presence, vin: 'X' };",
      '',
    ].join('\n'),
  );
  const tsc = spawnSync(
    process.execPath,
    [
      join(repoRoot, 'node_modules/typescript/bin/tsc'),
      '--noEmit',
      '--strict',
      '--noUncheckedIndexedAccess',
      '--verbatimModuleSyntax',
      '--allowImportingTsExtensions',
      '--erasableSyntaxOnly',
      '--isolatedModules',
      '--module',
      'nodenext',
      '--moduleResolution',
      'nodenext',
      '--target',
      'es2023',
      join(dir, 'mqtt.ts'),
      join(dir, 'use.ts'),
    ],
    { cwd: dir, encoding: 'utf8' },
  );
  assert.equal(tsc.status, 0, tsc.stdout + tsc.stderr);
});

test('when an operation has no MQTT QoS then generation fails and names it', async () => {
  const path = editDocument(copyOfContract(), (doc) =>
    doc.deleteIn(['operations', 'receiveCarTelemetry', 'bindings']),
  );
  await assert.rejects(generateMqtt(path), /receiveCarTelemetry/);
});

test('when the contract is not valid AsyncAPI then generation fails with the parser diagnostics', async () => {
  const path = editDocument(copyOfContract(), (doc) =>
    doc.deleteIn(['channels', 'carCommand', 'parameters', 'device_id']),
  );
  await assert.rejects(generateMqtt(path), /does not parse:\n.*channels\.carCommand\.parameters/s);
});

test('when a message payload is written inline then generation fails and names the message', async () => {
  const path = editDocument(copyOfContract(), (doc) =>
    doc.setIn(['components', 'messages', 'carPresence', 'payload'], { type: 'object' }),
  );
  await assert.rejects(generateMqtt(path), /message carPresence: payload must be a \$ref/);
});

test('when the real contract is linted then it has no error and no warning', async () => {
  const diagnostics = await lintAsyncApi(asyncapiPath);
  assert.deepEqual(diagnostics.filter(isFailing), []);
});

test('when a copy of the contract is intact then it lints clean, and when broken then lint reports an error', async () => {
  const intact = join(copyOfContract(), 'asyncapi/asyncapi.yaml');
  assert.deepEqual((await lintAsyncApi(intact)).filter(isFailing), []);

  const broken = editDocument(copyOfContract(), (doc) =>
    doc.deleteIn(['channels', 'carCommand', 'parameters', 'device_id']),
  );
  const failing = (await lintAsyncApi(broken)).filter(isFailing);
  assert.ok(
    failing.some((d) => d.path.join('.').startsWith('channels.carCommand.parameters')),
    JSON.stringify(failing.map((d) => d.message)),
  );
});

test('when the lint command runs on the repository then it exits 0 and says so', () => {
  const run = spawnSync(process.execPath, ['--import', 'tsx', join(repoRoot, 'scripts/lint-asyncapi.ts')], {
    cwd: repoRoot,
    encoding: 'utf8',
  });
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stdout, /no errors or warnings/);
});
