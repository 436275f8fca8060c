/**
 * generated/sdk-models.ts: camelCase models and converters for every schema a successful response
 * carries, checked against the contract's own examples; free-form objects keep their keys.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, test } from 'vitest';
import * as models from '../../generated/sdk-models.ts';
import type { OpenApiDocument } from '../codegen/openapi-bundle.ts';
import { camelCase, generateSdkModels } from '../codegen/sdk-models.ts';
import { repoRoot } from '../repo-root.ts';

type Schema = { [keyword: string]: unknown };

const doc = JSON.parse(readFileSync(join(repoRoot, 'generated/openapi.json'), 'utf8')) as OpenApiDocument;
const schemas = doc.components?.schemas as Record<string, Schema>;
const source = generateSdkModels(doc);
const file = ts.createSourceFile('sdk-models.ts', source, ts.ScriptTarget.Latest, true);

/** The interfaces of the generated file, by name, with every property name inside them (nested ones too). */
function modelProperties(): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const statement of file.statements) {
    if (!ts.isInterfaceDeclaration(statement)) continue;
    const names: string[] = [];
    const visit = (node: ts.Node): void => {
      if (ts.isPropertySignature(node)) names.push(node.name.getText(file));
      ts.forEachChild(node, visit);
    };
    visit(statement);
    found.set(statement.name.text, names);
  }
  return found;
}

const camel = /^[a-z][A-Za-z0-9]*$/;

function resolve(schema: Schema): Schema {
  const ref = schema.$ref;
  return typeof ref === 'string' ? resolve(schemas[ref.split('/').pop() as string] as Schema) : schema;
}

/**
 * Checks `model` is `wire` as the SDK should give it: every named field renamed to camelCase and
 * nothing else, free-form objects and maps exactly as sent. Written apart from the generator, to
 * check it.
 */
function assertModelOf(schema: Schema, wire: unknown, model: unknown, at: string): void {
  const resolved = resolve(schema);
  if (wire === null || typeof wire !== 'object') {
    assert.deepEqual(model, wire, at);
    return;
  }
  const members = [...((resolved.oneOf ?? resolved.anyOf ?? []) as Schema[])];
  if (members.length > 0) {
    const nonNull = members.find((member) => member.type !== 'null') as Schema;
    assertModelOf(nonNull, wire, model, at);
    return;
  }
  if (Array.isArray(wire)) {
    assert.ok(Array.isArray(model), at);
    assert.equal(model.length, wire.length, at);
    wire.forEach((item, index) => {
      assertModelOf(resolved.items as Schema, item, model[index], `${at}/${index}`);
    });
    return;
  }
  const properties = resolved.properties as Record<string, Schema> | undefined;
  if (!properties || resolved.additionalProperties === true) {
    assert.deepEqual(model, wire, `${at}: a free-form object keeps its keys as sent, known ones too`);
    return;
  }
  assert.ok(model !== null && typeof model === 'object', at);
  const expectedKeys = Object.keys(wire).map(camelCase).sort();
  assert.deepEqual(Object.keys(model).sort(), expectedKeys, at);
  for (const [wireName, value] of Object.entries(wire)) {
    const property = properties[wireName];
    assert.ok(property, `${at}/${wireName} is not in the schema`);
    assertModelOf(
      property,
      value,
      (model as Record<string, unknown>)[camelCase(wireName)],
      `${at}/${wireName}`,
    );
  }
}

describe('SDK v4 models', () => {
  test('when the contract is generated then the committed models are what it makes', () => {
    assert.equal(readFileSync(join(repoRoot, 'generated/sdk-models.ts'), 'utf8'), source);
  });

  test('when the models are generated then the vehicle and developer answers are among them', () => {
    const names = [...modelProperties().keys()];
    for (const name of [
      'Install',
      'InstalledApp',
      'CarStatus',
      'Location',
      'Car',
      'Command',
      'CommandList',
      'PairingCodeSent',
      'IdentityToken',
      'MiniApp',
      'MiniAppVersion',
      'Manifest',
      'DeveloperIdentity',
      'SshKey',
      'PackageLimits',
    ]) {
      assert.ok(names.includes(name), `no model ${name}`);
      assert.equal(typeof (models as Record<string, unknown>)[`to${name}`], 'function', `no to${name}`);
    }
    // Errors are SvcProblem's, not a model's.
    assert.ok(!names.includes('Problem'));
  });

  test('when any model is read then none of its fields, nested ones included, is snake_case', () => {
    const properties = modelProperties();
    assert.ok(properties.size >= 20);
    for (const [name, fields] of properties) {
      assert.deepEqual(
        fields.filter((field) => !camel.test(field)),
        [],
        `${name} has fields that are not camelCase`,
      );
    }
    assert.ok(properties.get('CarStatus')?.includes('deviceId'));
    assert.ok(properties.get('Location')?.includes('recordedAt'));
    assert.ok(properties.get('Install')?.includes('installedApps'));
  });

  test("when the contract's examples are converted then each field is renamed, and free-form objects keep their keys", () => {
    let checked = 0;
    for (const name of modelProperties().keys()) {
      const convert = (models as Record<string, unknown>)[`to${name}`] as (wire: unknown) => unknown;
      for (const example of (schemas[name]?.examples ?? []) as unknown[]) {
        assertModelOf(schemas[name] as Schema, example, convert(example), `#/${name}`);
        checked++;
      }
    }
    assert.ok(checked >= 15, `only ${checked} examples`);
    const status = models.toCarStatus(schemas.CarStatus?.examples?.[0 as never] as never);
    assert.deepEqual(status.state, { ignition: false, doors_locked: true });
  });

  test("when a free-form object names keys it knows then its type has them as sent, beside the car's own", () => {
    assert.match(
      source,
      /export type CarState = \{\n(.*\n)*? {2}ignition\?: boolean;\n(.*\n)*? {2}doors_locked\?: boolean;\n {2}\[key: string\]: unknown;\n\};/,
    );
    assert.match(source, /^ {2}state: CarState;$/m);
    const wire = {
      device_id: 'brand_a:1HGCM82633A004352',
      brand: 'brand_a',
      online: true,
      last_seen: null,
      state: { ignition: true, doors_locked: false, fuel_level_pct: 41 },
      reported_at: null,
    } as const;
    const status = models.toCarStatus(wire);
    assert.deepEqual(status.state, { ignition: true, doors_locked: false, fuel_level_pct: 41 });
    const doorsLocked: boolean | undefined = status.state.doors_locked;
    assert.equal(doorsLocked, false);
  });

  test('when an optional field is absent then the model has no key for it, and a null stays null', () => {
    const location = models.toLocation({
      device_id: 'brand_a:1HGCM82633A004352',
      brand: 'brand_a',
      latitude: 48.1,
      longitude: 11.5,
      recorded_at: '2026-11-21T10:06:00Z',
    });
    assert.deepEqual(Object.keys(location).sort(), [
      'brand',
      'deviceId',
      'latitude',
      'longitude',
      'recordedAt',
    ]);
    const app = models.toMiniApp({
      id: 'com.example.hello-car',
      name: 'Hello Car',
      owner_id: '0b9d6f4e-1c2a-4e5b-8f3d-7a6c5b4e3d21',
      latest_version: null,
      live_version: null,
      versions: [],
      created_at: '2026-11-21T10:00:00Z',
      updated_at: '2026-11-21T10:00:00Z',
    });
    assert.equal(app.latestVersion, null);
  });

  test('when the contract has a shape the models cannot express then generation fails, naming it', () => {
    const withSchema = (schema: Schema): OpenApiDocument => ({
      ...doc,
      components: { ...doc.components, schemas: { ...schemas, CarStatus: schema } },
    });
    assert.throws(
      () => generateSdkModels(withSchema({ type: 'object', properties: { deviceId: { type: 'string' } } })),
      /property "deviceId" is not snake_case/,
    );
    // An answer's own fields are named (camelCase), so it cannot also be free-form.
    assert.throws(
      () =>
        generateSdkModels(
          withSchema({ type: 'object', properties: { a: { type: 'string' } }, additionalProperties: true }),
        ),
      /CarStatus, an answer, has both properties and additionalProperties/,
    );
    // Keys kept as sent cannot hold fields to rename.
    assert.throws(
      () =>
        generateSdkModels({
          ...doc,
          components: {
            ...doc.components,
            schemas: {
              ...schemas,
              CarState: {
                type: 'object',
                additionalProperties: true,
                properties: { doors: { type: 'object', properties: { front_left: { type: 'boolean' } } } },
              },
            },
          },
        }),
      /"doors" of a free-form object has fields of its own/,
    );
    assert.throws(
      () => generateSdkModels(withSchema({ type: 'object', properties: { a: { description: 'no type' } } })),
      /without a type/,
    );
  });
});
