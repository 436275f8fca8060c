/**
 * generated/mqtt.ts: car topic templates, payload types, QoS, retain and direction, from asyncapi/.
 * The document is read through `@asyncapi/parser`, which validates it and resolves every `$ref`
 * (in the document and to openapi/ files); this module only checks what the generated code relies on.
 */
import { relative } from 'node:path';
import { type AsyncAPIDocumentInterface, fromFile, Parser } from '@asyncapi/parser';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { formatDiagnostic, isFailing } from '../lint-asyncapi.ts';
import { banner } from './banner.ts';

type Json = Record<string, unknown>;

/** Which channel parameter fills which argument of the generated functions. */
const parameterArguments = { brand: 'brand', device_id: 'nativeId' } as const;
type ParameterName = keyof typeof parameterArguments;

type Segment = { literal: string } | { parameter: ParameterName };

interface CarTopic {
  suffix: string;
  payloadType: string;
  summary: string;
  qos: 0 | 1 | 2;
  retain: boolean;
  serviceSends: boolean;
  serviceReceives: boolean;
}

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The parser names each schema it resolved under this key: a components schema by its own key. */
const schemaIdKey = 'x-parser-schema-id';

/** The contract, parsed, validated and with every `$ref` resolved; shared with the payload validators. */
export async function parseContract(path: string): Promise<AsyncAPIDocumentInterface> {
  const { document, diagnostics } = await fromFile(new Parser(), path).parse();
  if (!document) {
    const errors = diagnostics.filter(isFailing).map((d) => formatDiagnostic(d, process.cwd()));
    throw new Error(`asyncapi: ${relative(process.cwd(), path)} does not parse:\n${errors.join('\n')}`);
  }
  return document;
}

function parseAddress(address: string, channel: string): { prefix: Segment[]; suffix: string } {
  const segments = address.split('/');
  const lastParameter = segments.findLastIndex((s) => s.startsWith('{'));
  const prefix = segments.slice(0, lastParameter + 1).map((segment): Segment => {
    const name = /^\{([a-z_]+)\}$/.exec(segment)?.[1];
    if (name && name in parameterArguments) return { parameter: name as ParameterName };
    // A literal becomes part of generated source text and of topic filters, hence the narrow set.
    if (/^[a-z][a-z0-9_-]*$/.test(segment)) return { literal: segment };
    throw new Error(`asyncapi: channel ${channel}: unexpected address segment "${segment}"`);
  });
  const suffix = segments.slice(lastParameter + 1).join('/');
  if (!/^[a-z][a-z0-9_-]*(\/[a-z][a-z0-9_-]*)*$/.test(suffix)) {
    throw new Error(`asyncapi: channel ${channel}: address "${address}" must end in literal segments`);
  }
  for (const name of Object.keys(parameterArguments)) {
    if (prefix.filter((s) => 'parameter' in s && s.parameter === name).length !== 1) {
      throw new Error(`asyncapi: channel ${channel}: address "${address}" must hold {${name}} once`);
    }
  }
  return { prefix, suffix };
}

/**
 * A resolved schema as openapi-typescript should see it: every nested schema that is one of the
 * document's components schemas becomes a `$ref` to it again (so the generated types refer to
 * each other), and the parser's own `x-parser-*` keys are dropped.
 */
function relinked(node: unknown, componentNames: ReadonlySet<string>, root: boolean): unknown {
  if (Array.isArray(node)) return node.map((item) => relinked(item, componentNames, false));
  if (!isObject(node)) return node;
  const id = node[schemaIdKey];
  if (!root && typeof id === 'string' && componentNames.has(id))
    return { $ref: `#/components/schemas/${id}` };
  const out: Json = {};
  for (const [key, value] of Object.entries(node)) {
    if (!key.startsWith('x-parser-')) out[key] = relinked(value, componentNames, false);
  }
  return out;
}

/** The `components` interface openapi-typescript makes of the document's schemas, unexported. */
async function schemaTypes(document: AsyncAPIDocumentInterface): Promise<string> {
  const components = document.components().schemas().all();
  const names = new Set(components.map((schema) => schema.id()));
  const synthetic = {
    openapi: '3.1.0',
    info: { title: 'asyncapi schemas', version: '0' },
    paths: {},
    components: {
      schemas: Object.fromEntries(
        components.map((schema) => [schema.id(), relinked(schema.json(), names, true)]),
      ),
    },
  };
  const nodes = await openapiTS(synthetic as unknown as Parameters<typeof openapiTS>[0], {
    alphabetize: false,
    immutable: false,
    silent: true,
  });
  const declaration = nodes.find(
    (node): node is ts.InterfaceDeclaration =>
      ts.isInterfaceDeclaration(node) && node.name.text === 'components',
  );
  if (!declaration) throw new Error('openapi-typescript made no components interface');
  // Only the named payload types below are this module's API; the interface is their storage.
  const unexported = ts.factory.updateInterfaceDeclaration(
    declaration,
    undefined,
    declaration.name,
    declaration.typeParameters,
    declaration.heritageClauses,
    declaration.members,
  );
  return astToString(unexported);
}

function collectTopics(document: AsyncAPIDocumentInterface): { prefix: Segment[]; topics: CarTopic[] } {
  const componentSchemas = document.components().schemas();
  let prefix: Segment[] | undefined;
  const topics = new Map<string, CarTopic>();
  for (const channel of document.channels()) {
    const key = channel.id();
    const rawAddress = channel.address();
    if (typeof rawAddress !== 'string') throw new Error(`asyncapi: channel ${key} has no address`);
    const address = parseAddress(rawAddress, key);
    if (prefix && JSON.stringify(prefix) !== JSON.stringify(address.prefix)) {
      throw new Error(`asyncapi: channel ${key}: every car topic must share one prefix template`);
    }
    prefix = address.prefix;
    if ([...topics.values()].some((t) => t.suffix === address.suffix)) {
      throw new Error(`asyncapi: channel ${key}: another channel already has the suffix ${address.suffix}`);
    }

    const messages = channel.messages().all();
    const [message] = messages;
    if (messages.length !== 1 || !message) {
      throw new Error(`asyncapi: channel ${key} must carry exactly one message`);
    }
    // A components schema keeps its key as id; an inline payload gets an anonymous one.
    const payloadType = message.payload()?.id();
    if (!payloadType || !/^[A-Z][A-Za-z0-9]*$/.test(payloadType) || !componentSchemas.has(payloadType)) {
      throw new Error(
        `asyncapi: message ${message.id()}: payload must be a $ref to #/components/schemas/<TypeName>`,
      );
    }
    topics.set(key, {
      suffix: address.suffix,
      payloadType,
      summary: message.summary() ?? message.title() ?? '',
      qos: 0,
      retain: false,
      serviceSends: false,
      serviceReceives: false,
    });
  }
  if (!prefix) throw new Error('asyncapi: the document has no channels');

  const bound = new Set<string>();
  for (const operation of document.operations()) {
    const key = operation.id();
    const channels = operation.channels().all();
    const channelKey = channels.length === 1 ? channels[0]?.id() : undefined;
    const topic = channelKey === undefined ? undefined : topics.get(channelKey);
    if (channelKey === undefined || !topic) {
      throw new Error(`asyncapi: operation ${key} must $ref a channel of #/channels`);
    }
    if (operation.action() === 'send') topic.serviceSends = true;
    else if (operation.action() === 'receive') topic.serviceReceives = true;
    else throw new Error(`asyncapi: operation ${key}: action must be send or receive`);

    const mqtt = operation.bindings().get('mqtt')?.value();
    // The MQTT binding has no default QoS, and guessing one for a car topic is how messages get lost.
    if (!isObject(mqtt) || (mqtt.qos !== 0 && mqtt.qos !== 1 && mqtt.qos !== 2)) {
      throw new Error(`asyncapi: operation ${key} needs an mqtt binding with qos 0, 1 or 2`);
    }
    const retain = mqtt.retain === true;
    if (bound.has(channelKey) && (topic.qos !== mqtt.qos || topic.retain !== retain)) {
      throw new Error(`asyncapi: operation ${key}: operations of one channel disagree on qos or retain`);
    }
    bound.add(channelKey);
    topic.qos = mqtt.qos;
    topic.retain = retain;
  }
  for (const key of topics.keys()) {
    if (!bound.has(key)) throw new Error(`asyncapi: channel ${key} has no operation`);
  }
  return { prefix, topics: [...topics.values()] };
}

const quoteKey = (key: string) => (/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? key : `'${key}'`);
const list = (values: string[]) => `[${values.map((v) => `'${v}'`).join(', ')}]`;

/** The topic as text, each parameter segment replaced by `fill(parameter)`. */
function topicText(prefix: Segment[], fill: (parameter: ParameterName) => string, suffix: string): string {
  return [...prefix.map((s) => ('literal' in s ? s.literal : fill(s.parameter))), suffix].join('/');
}

function parseCarTopicBody(prefix: Segment[]): string[] {
  const checks = prefix.flatMap((s, i) => ('literal' in s ? [`segments[${i}] !== '${s.literal}'`] : []));
  const reads = prefix.flatMap((s, i) =>
    'parameter' in s ? [`  const ${parameterArguments[s.parameter]} = segments[${i}];`] : [],
  );
  return [
    "  const segments = topic.split('/');",
    // A topic name never holds wildcards, and an empty segment is a missing brand or id.
    `  if (segments.length <= ${prefix.length} || segments.some((s) => s === '' || /[+#]/.test(s))) return undefined;`,
    ...(checks.length > 0 ? [`  if (${checks.join(' || ')}) return undefined;`] : []),
    ...reads,
    `  const suffix = segments.slice(${prefix.length}).join('/');`,
    '  if (brand === undefined || nativeId === undefined || !isCarTopicSuffix(suffix)) return undefined;',
    '  return { brand, nativeId, suffix };',
  ];
}

export async function generateMqtt(asyncapiPath: string): Promise<string> {
  const document = await parseContract(asyncapiPath);
  const { prefix, topics } = collectTopics(document);
  const types = await schemaTypes(document);
  const suffixes = topics.map((t) => t.suffix);
  const pattern = topicText(prefix, (p) => `{${p}}`, '<suffix>');
  const perTopic = (value: (topic: CarTopic) => string) =>
    topics.map((t) => `  ${quoteKey(t.suffix)}: ${value(t)},`);

  const lines = [
    banner('asyncapi/asyncapi.yaml'),
    `/** The car topics, by suffix, in the order of the contract: \`${pattern}\`. */`,
    `export const carTopicSuffixes = ${list(suffixes)} as const;`,
    '',
    'export type CarTopicSuffix = (typeof carTopicSuffixes)[number];',
    '',
    types.trimEnd(),
    '',
    // Two topics may share a payload type: it is declared once, described by the first of them.
    ...topics
      .filter((t, i) => topics.findIndex((u) => u.payloadType === t.payloadType) === i)
      .flatMap((t) => [
        `/** ${t.summary} Payload of \`${t.suffix}\`. */`,
        `export type ${t.payloadType} = components['schemas']['${t.payloadType}'];`,
        '',
      ]),
    '/** The payload type carried by each car topic. */',
    'export interface CarTopicPayloads {',
    ...topics.map((t) => `  ${quoteKey(t.suffix)}: ${t.payloadType};`),
    '}',
    '',
    'const suffixSet: ReadonlySet<string> = new Set(carTopicSuffixes);',
    '',
    'export function isCarTopicSuffix(value: string): value is CarTopicSuffix {',
    '  return suffixSet.has(value);',
    '}',
    '',
    '/**',
    ` * The topic \`${pattern}\` of one car, where \`nativeId\` is the`,
    ' * device id WITHOUT its `<brand>:` prefix. Nothing is validated here: callers validate the brand',
    ' * and the native id first.',
    ' */',
    'export function carTopic(brand: string, nativeId: string, suffix: CarTopicSuffix): string {',
    `  return \`${topicText(prefix, (p) => `\${${parameterArguments[p]}}`, `\${suffix}`)}\`;`,
    '}',
    '',
    '/** The inverse of `carTopic`; `undefined` for any topic that is not a well-formed car topic. */',
    'export function parseCarTopic(',
    '  topic: string,',
    '): { brand: string; nativeId: string; suffix: CarTopicSuffix } | undefined {',
    ...parseCarTopicBody(prefix),
    '}',
    '',
    '/** The subscription filter for one suffix of every car, or of every car of one brand. */',
    'export function carTopicFilter(suffix: CarTopicSuffix, brand?: string): string {',
    `  return \`${topicText(prefix, (p) => (p === 'brand' ? `\${brand ?? '+'}` : '+'), `\${suffix}`)}\`;`,
    '}',
    '',
    '/** The MQTT QoS both sides use on each car topic. */',
    'export const carTopicQos: { readonly [S in CarTopicSuffix]: 0 | 1 | 2 } = {',
    ...perTopic((t) => String(t.qos)),
    '};',
    '',
    '/** Whether messages on each car topic are published retained. */',
    'export const carTopicRetain: { readonly [S in CarTopicSuffix]: boolean } = {',
    ...perTopic((t) => String(t.retain)),
    '};',
    '',
    '/** The car topics the service publishes to; cars subscribe to them (each to its own). */',
    `export const serviceSends = ${list(topics.filter((t) => t.serviceSends).map((t) => t.suffix))} as const satisfies readonly CarTopicSuffix[];`,
    '',
    'export type ServiceSentSuffix = (typeof serviceSends)[number];',
    '',
    '/** The car topics the service subscribes to; cars publish them (each under its own). */',
    `export const serviceReceives = ${list(topics.filter((t) => t.serviceReceives).map((t) => t.suffix))} as const satisfies readonly CarTopicSuffix[];`,
    '',
    'export type ServiceReceivedSuffix = (typeof serviceReceives)[number];',
    '',
  ];
  return lines.join('\n');
}
