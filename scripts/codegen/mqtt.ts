/** generated/mqtt.ts: car topic templates, payload types, QoS, retain and direction, from asyncapi/. */
import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { parse } from 'yaml';
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

function pointer(doc: unknown, fragment: string, where: string): unknown {
  let node = doc;
  for (const raw of fragment.replace(/^#?\/?/, '').split('/')) {
    if (raw === '') continue;
    const key = decodeURIComponent(raw).replaceAll('~1', '/').replaceAll('~0', '~');
    if (!isObject(node) || !(key in node)) throw new Error(`asyncapi: ${where}: no ${fragment}`);
    node = node[key];
  }
  return node;
}

/** Follows in-document `$ref`s to the object they name. */
function follow(doc: Json, node: unknown, where: string): Json {
  const seen = new Set<string>();
  while (isObject(node) && typeof node.$ref === 'string') {
    const ref = node.$ref;
    if (!ref.startsWith('#/')) {
      throw new Error(`asyncapi: ${where}: only schemas may $ref another file (${ref})`);
    }
    if (seen.has(ref)) throw new Error(`asyncapi: ${where}: $ref cycle at ${ref}`);
    seen.add(ref);
    node = pointer(doc, ref, where);
  }
  if (!isObject(node)) throw new Error(`asyncapi: ${where} must be an object`);
  return node;
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
 * A schema with every reference to another file replaced by that file's content, so that
 * openapi-typescript sees one self-contained document; `#/components/schemas/...` references of
 * the AsyncAPI document itself stay, and become references between the generated types.
 */
async function inlineFileRefs(
  node: unknown,
  file: string,
  rootFile: string,
  stack: string[],
): Promise<unknown> {
  if (Array.isArray(node)) {
    return Promise.all(node.map((item) => inlineFileRefs(item, file, rootFile, stack)));
  }
  if (!isObject(node)) return node;
  if (typeof node.$ref === 'string') {
    const [target = '', fragment = ''] = node.$ref.split('#');
    const targetFile = target === '' ? file : resolve(dirname(file), target);
    if (targetFile === rootFile) {
      if (!fragment.startsWith('/components/schemas/')) {
        throw new Error(`asyncapi: schema $ref ${node.$ref} must name a components schema`);
      }
      return { $ref: `#${fragment}` };
    }
    const key = `${targetFile}#${fragment}`;
    if (stack.includes(key)) throw new Error(`asyncapi: $ref cycle through ${key}`);
    const referenced = pointer(parse(await readFile(targetFile, 'utf8')), fragment, targetFile);
    return inlineFileRefs(referenced, targetFile, rootFile, [...stack, key]);
  }
  const out: Json = {};
  for (const [key, value] of Object.entries(node)) {
    out[key] = await inlineFileRefs(value, file, rootFile, stack);
  }
  return out;
}

/** The `components` interface openapi-typescript makes of the document's schemas, unexported. */
async function schemaTypes(doc: Json, asyncapiPath: string): Promise<string> {
  const schemas = isObject(doc.components) && isObject(doc.components.schemas) ? doc.components.schemas : {};
  const synthetic = {
    openapi: '3.1.0',
    info: { title: 'asyncapi schemas', version: '0' },
    paths: {},
    components: { schemas: await inlineFileRefs(schemas, asyncapiPath, asyncapiPath, []) },
  };
  const nodes = await openapiTS(synthetic as unknown as Parameters<typeof openapiTS>[0], {
    alphabetize: false,
    immutable: false,
    silent: true,
  });
  const components = nodes.find(
    (node): node is ts.InterfaceDeclaration =>
      ts.isInterfaceDeclaration(node) && node.name.text === 'components',
  );
  if (!components) throw new Error('openapi-typescript made no components interface');
  // Only the named payload types below are this module's API; the interface is their storage.
  const unexported = ts.factory.updateInterfaceDeclaration(
    components,
    undefined,
    components.name,
    components.typeParameters,
    components.heritageClauses,
    components.members,
  );
  return astToString(unexported);
}

function collectTopics(doc: Json): { prefix: Segment[]; topics: CarTopic[] } {
  if (!isObject(doc.channels) || !isObject(doc.operations)) {
    throw new Error('asyncapi: the document needs channels and operations');
  }
  let prefix: Segment[] | undefined;
  const topics = new Map<string, CarTopic>();
  for (const [key, raw] of Object.entries(doc.channels)) {
    const channel = follow(doc, raw, `channels.${key}`);
    if (typeof channel.address !== 'string') throw new Error(`asyncapi: channel ${key} has no address`);
    const address = parseAddress(channel.address, key);
    if (prefix && JSON.stringify(prefix) !== JSON.stringify(address.prefix)) {
      throw new Error(`asyncapi: channel ${key}: every car topic must share one prefix template`);
    }
    prefix = address.prefix;
    if ([...topics.values()].some((t) => t.suffix === address.suffix)) {
      throw new Error(`asyncapi: channel ${key}: another channel already has the suffix ${address.suffix}`);
    }

    const messages = isObject(channel.messages) ? Object.entries(channel.messages) : [];
    const [only] = messages;
    if (messages.length !== 1 || !only) {
      throw new Error(`asyncapi: channel ${key} must carry exactly one message`);
    }
    const message = follow(doc, only[1], `channels.${key}.messages.${only[0]}`);
    const payloadRef = isObject(message.payload) ? message.payload.$ref : undefined;
    const payloadType =
      typeof payloadRef === 'string'
        ? /^#\/components\/schemas\/([A-Z][A-Za-z0-9]*)$/.exec(payloadRef)?.[1]
        : undefined;
    if (!payloadType) {
      throw new Error(
        `asyncapi: message ${only[0]}: payload must be a $ref to #/components/schemas/<TypeName>`,
      );
    }
    const summary = typeof message.summary === 'string' ? message.summary : String(message.title ?? '');
    topics.set(key, {
      suffix: address.suffix,
      payloadType,
      summary,
      qos: 0,
      retain: false,
      serviceSends: false,
      serviceReceives: false,
    });
  }
  if (!prefix) throw new Error('asyncapi: the document has no channels');

  const bound = new Set<string>();
  for (const [key, raw] of Object.entries(doc.operations)) {
    const operation = follow(doc, raw, `operations.${key}`);
    const channelRef = isObject(operation.channel) ? operation.channel.$ref : undefined;
    const channelKey =
      typeof channelRef === 'string' ? /^#\/channels\/([^/]+)$/.exec(channelRef)?.[1] : undefined;
    const topic = channelKey === undefined ? undefined : topics.get(channelKey);
    if (channelKey === undefined || !topic) {
      throw new Error(`asyncapi: operation ${key} must $ref a channel of #/channels`);
    }
    if (operation.action === 'send') topic.serviceSends = true;
    else if (operation.action === 'receive') topic.serviceReceives = true;
    else throw new Error(`asyncapi: operation ${key}: action must be send or receive`);

    const bindings = isObject(operation.bindings)
      ? follow(doc, operation.bindings, `operations.${key}.bindings`)
      : {};
    const mqtt = isObject(bindings.mqtt)
      ? follow(doc, bindings.mqtt, `operations.${key}.bindings.mqtt`)
      : undefined;
    // The MQTT binding has no default QoS, and guessing one for a car topic is how messages get lost.
    if (!mqtt || (mqtt.qos !== 0 && mqtt.qos !== 1 && mqtt.qos !== 2)) {
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
  const doc = parse(await readFile(asyncapiPath, 'utf8')) as unknown;
  if (!isObject(doc)) throw new Error('asyncapi: the document must be a mapping');
  const { prefix, topics } = collectTopics(doc);
  const types = await schemaTypes(doc, asyncapiPath);
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
