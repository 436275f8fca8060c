/**
 * generated/mqtt-payload-validators.cjs: the AsyncAPI payload schemas, compiled once by ajv's
 * standalone code generation, so that the bridge checks every MQTT message against the contract
 * without compiling anything at start-up. One validator per payload type, and `payloadValidators`
 * by topic suffix, in the contract's order.
 *
 * The schemas are read through `@asyncapi/parser` (as generated/mqtt.ts is), which resolves every
 * `$ref`, also those into openapi/: each payload schema is self-contained once read. The AsyncAPI
 * schema format is a superset of JSON Schema draft 7; the `x-` extensions (the parser's own and the
 * contract's, which are for codegen) are left out so that ajv's strict mode refuses anything else.
 * Formats (`date-time`, `uuid`) are ajv-formats' full ones, loaded by the generated code with
 * `require`: a date the store would refuse (`2026-02-30`) fails here instead. `uuid` is the
 * service's own grammar (client/src/uuid.ts), inlined as its pattern: ajv-formats' also takes
 * `urn:uuid:…`, which the store refuses.
 */
import { _, Ajv } from 'ajv';
import standalone from 'ajv/dist/standalone/index.js';
import addFormats from 'ajv-formats';
import { uuidPattern } from '../../client/src/uuid.ts';
import { banner } from './banner.ts';
import { parseContract } from './mqtt.ts';

const source = 'asyncapi/asyncapi.yaml';
const schemaMapKeywords = new Set(['properties', 'patternProperties', 'definitions', 'dependencies']);
const valueKeywords = new Set(['enum', 'const', 'default', 'examples']);

/** The schema without `x-` keys; property names are kept whatever they are. */
function withoutExtensions(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withoutExtensions);
  if (node === null || typeof node !== 'object') return node;
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    if (key.startsWith('x-')) continue;
    if (schemaMapKeywords.has(key) && value !== null && typeof value === 'object') {
      copy[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withoutExtensions(v)]));
    } else {
      copy[key] = valueKeywords.has(key) ? value : withoutExtensions(value);
    }
  }
  return copy;
}

const validatorName = (payloadType: string) => `validate${payloadType}`;

/** Each car topic's suffix and payload type, in the contract's order. */
async function payloadsBySuffix(asyncapiPath: string) {
  const document = await parseContract(asyncapiPath);
  return document
    .channels()
    .all()
    .map((channel) => {
      // The suffix is what follows the last parameter, as generated/mqtt.ts reads it.
      const segments = String(channel.address()).split('/');
      const suffix = segments.slice(segments.findLastIndex((s) => s.startsWith('{')) + 1).join('/');
      const payload = channel.messages().all()[0]?.payload();
      const payloadType = payload?.id();
      // generated/mqtt.ts checks the shape of channels and payloads; here it is only relied on.
      if (!payload || !payloadType) throw new Error(`asyncapi: channel ${channel.id()} has no payload`);
      return { suffix, payloadType, schema: withoutExtensions(payload.json()) as Record<string, unknown> };
    });
}

/**
 * The variants of the `cmd` payload (`CarCommand`, one of), by the `const` of their `name`: the
 * service checks a command a caller asks for against its own variant before sending anything, so
 * that a bad argument is reported against that command alone, not against every variant.
 */
function commandVariants(topics: Awaited<ReturnType<typeof payloadsBySuffix>>) {
  const command = topics.find((t) => t.suffix === 'cmd');
  const variants = command?.schema.oneOf;
  if (!Array.isArray(variants)) throw new Error('asyncapi: the cmd payload must be one of its commands');
  return variants.map((variant: { properties?: { name?: { const?: unknown } } }, index) => {
    const name = variant.properties?.name?.const;
    if (typeof name !== 'string') throw new Error(`asyncapi: command variant ${index} has no const name`);
    return { name, schema: variant as Record<string, unknown> };
  });
}

const commandValidatorName = (index: number) => `validateCommandVariant${index}`;

export async function generateMqttPayloadValidators(asyncapiPath: string): Promise<string> {
  const topics = await payloadsBySuffix(asyncapiPath);
  const commands = commandVariants(topics);
  const ajv = new Ajv({
    strict: true,
    allErrors: true,
    code: { source: true, lines: true, formats: _`require("ajv-formats/dist/formats").fullFormats` },
  });
  addFormats.default(ajv);
  ajv.addFormat('uuid', uuidPattern);
  const exports: Record<string, string> = {};
  for (const { payloadType, schema } of topics) {
    if (validatorName(payloadType) in exports) continue;
    ajv.addSchema(schema, payloadType);
    exports[validatorName(payloadType)] = payloadType;
  }
  commands.forEach(({ schema }, index) => {
    ajv.addSchema(schema, commandValidatorName(index));
    exports[commandValidatorName(index)] = commandValidatorName(index);
  });
  const code = standalone.default(ajv, exports);
  const bySuffix = topics.map(
    (t) => `  ${JSON.stringify(t.suffix)}: exports.${validatorName(t.payloadType)},`,
  );
  const byName = commands.map(
    ({ name }, index) => `  ${JSON.stringify(name)}: exports.${commandValidatorName(index)},`,
  );
  return [
    banner(source) + code,
    'exports.payloadValidators = {',
    ...bySuffix,
    '};',
    'exports.commandValidators = {',
    ...byName,
    '};',
    '',
  ].join('\n');
}

/** Types of generated/mqtt-payload-validators.cjs, for TypeScript. */
export async function generateMqttPayloadValidatorTypes(asyncapiPath: string): Promise<string> {
  const topics = await payloadsBySuffix(asyncapiPath);
  const types = [...new Set(topics.map((t) => t.payloadType))];
  return [
    banner(source),
    "import type { ErrorObject } from 'ajv';",
    `import type { CarTopicPayloads, ${types.join(', ')} } from './mqtt.ts';`,
    '',
    '/** A payload schema of the contract, compiled with `allErrors`. */',
    'export interface PayloadValidator<T> {',
    '  (value: unknown): value is T;',
    '  errors?: ErrorObject[] | null;',
    '}',
    '',
    ...types.map((t) => `export declare const ${validatorName(t)}: PayloadValidator<${t}>;`),
    '',
    '/** The validator of each car topic, by suffix. */',
    'export declare const payloadValidators: {',
    '  readonly [S in keyof CarTopicPayloads]: PayloadValidator<CarTopicPayloads[S]>;',
    '};',
    '',
    '/** The validator of each command (a variant of the `cmd` payload), by its name. */',
    'export declare const commandValidators: {',
    "  readonly [N in CarCommand['name']]: PayloadValidator<Extract<CarCommand, { name: N }>>;",
    '};',
    '',
  ].join('\n');
}
