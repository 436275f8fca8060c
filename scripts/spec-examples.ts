/**
 * The examples of the contract, checked as an integrator would use them (`npm run lint:spec`):
 * every operation, parameter and request body of openapi/ shows one, every message of asyncapi/
 * too, and every example anywhere validates against its own schema (Ajv, formats checked). A URL
 * an example gives on the contract's own server must be a call the contract accepts, parameters
 * and all: the presigned upload URL an integrator copies from the docs must pass its own patterns.
 */
import { Ajv as AjvDraft7, type AnySchema, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

type Node = Record<string, unknown>;
type AjvInstance = InstanceType<typeof Ajv2020> | InstanceType<typeof AjvDraft7>;

/** One thing wrong, at a JSON pointer into the bundled document. */
export interface ExampleProblem {
  pointer: string;
  message: string;
}

const isNode = (value: unknown): value is Node =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const escapePointer = (key: string) => key.replaceAll('~', '~0').replaceAll('/', '~1');
const unescapePointer = (key: string) => key.replaceAll('~1', '/').replaceAll('~0', '~');

function at(doc: Node, pointer: string): unknown {
  return pointer
    .split('/')
    .slice(1)
    .reduce<unknown>(
      (node, key) => (isNode(node) || Array.isArray(node) ? (node as Node)[unescapePointer(key)] : undefined),
      doc,
    );
}

/** The node and its pointer, following `$ref`s within the document. */
function resolve(doc: Node, node: unknown, pointer: string): { node: Node; pointer: string } | undefined {
  const seen = new Set<string>();
  let current = node;
  let where = pointer;
  while (isNode(current) && typeof current.$ref === 'string' && current.$ref.startsWith('#/')) {
    if (seen.has(current.$ref)) return undefined;
    seen.add(current.$ref);
    where = current.$ref.slice(1);
    current = at(doc, where);
  }
  return isNode(current) ? { node: current, pointer: where } : undefined;
}

const schemaMaps = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'];
const schemaSingles = [
  'items',
  'additionalProperties',
  'unevaluatedProperties',
  'unevaluatedItems',
  'contains',
  'propertyNames',
  'not',
  'if',
  'then',
  'else',
  'contentSchema',
];
const schemaLists = ['allOf', 'anyOf', 'oneOf', 'prefixItems'];

/** Every schema inside `schema` (itself included), with its pointer; `$ref`s are not followed. */
function* subschemas(schema: unknown, pointer: string): Generator<{ schema: Node; pointer: string }> {
  if (!isNode(schema)) return;
  yield { schema, pointer };
  for (const key of schemaMaps) {
    const map = schema[key];
    if (!isNode(map)) continue;
    for (const [name, child] of Object.entries(map))
      yield* subschemas(child, `${pointer}/${key}/${escapePointer(name)}`);
  }
  for (const key of schemaSingles) yield* subschemas(schema[key], `${pointer}/${key}`);
  for (const key of schemaLists) {
    const list = schema[key];
    if (Array.isArray(list))
      for (const [i, child] of list.entries()) yield* subschemas(child, `${pointer}/${key}/${i}`);
  }
}

function hasOwnExample(node: Node): boolean {
  return (
    node.example !== undefined ||
    (Array.isArray(node.examples) && node.examples.length > 0) ||
    (isNode(node.examples) && Object.keys(node.examples).length > 0)
  );
}

/** Vendor extensions and the OpenAPI/AsyncAPI words a schema may hold, for Ajv's strict mode. */
function keywordsOutsideJsonSchema(doc: Node): string[] {
  const found = new Set(['example', 'discriminator', 'xml', 'externalDocs']);
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(visit);
    if (!isNode(node)) return;
    for (const [key, value] of Object.entries(node)) {
      if (key.startsWith('x-')) found.add(key);
      visit(value);
    }
  };
  visit(doc);
  return [...found];
}

/** Checks values against schemas of `doc`, each schema named by its pointer, compiled once. */
function validatorFor(doc: Node, dialect: '2020-12' | 'draft-07') {
  const id = 'https://contract.invalid/document.json';
  const options = {
    strict: true,
    strictTypes: false,
    strictRequired: false,
    allErrors: true,
    validateSchema: false,
  };
  const ajv: AjvInstance = dialect === '2020-12' ? new Ajv2020(options) : new AjvDraft7(options);
  addFormats.default(ajv);
  for (const keyword of keywordsOutsideJsonSchema(doc)) if (!ajv.getKeyword(keyword)) ajv.addKeyword(keyword);
  // The document goes under $defs, its own `$ref`s rewritten to match, so that Ajv compiles only
  // the schemas examples are checked against (strictly), never the document's root.
  const rebased = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(rebased);
    if (!isNode(node)) return node;
    return Object.fromEntries(
      Object.entries(node).map(([key, value]) => [
        key,
        key === '$ref' && typeof value === 'string' && value.startsWith('#/')
          ? `#/$defs/document${value.slice(1)}`
          : rebased(value),
      ]),
    );
  };
  ajv.addSchema({ $id: id, $defs: { document: rebased(doc) } } as AnySchema);
  const compiled = new Map<string, ValidateFunction>();
  return (pointer: string, value: unknown): string | undefined => {
    let validate = compiled.get(pointer);
    if (!validate) {
      try {
        validate = ajv.compile({
          $ref: `${id}#/$defs/document${pointer.split('/').map(encodeURIComponent).join('/')}`,
        });
      } catch (error) {
        return `its schema does not compile: ${(error as Error).message}`;
      }
      compiled.set(pointer, validate);
    }
    if (validate(value)) return undefined;
    return ajv.errorsText(validate.errors, { dataVar: 'example' });
  };
}

/** The examples an object with a sibling `schema` (parameter, header, media type) gives. */
function siblingExamples(doc: Node, holder: Node, pointer: string): { value: unknown; pointer: string }[] {
  const examples: { value: unknown; pointer: string }[] = [];
  if (holder.example !== undefined) examples.push({ value: holder.example, pointer: `${pointer}/example` });
  if (isNode(holder.examples)) {
    for (const [name, entry] of Object.entries(holder.examples)) {
      const example = resolve(doc, entry, `${pointer}/examples/${escapePointer(name)}`);
      if (example && 'value' in example.node) {
        examples.push({ value: example.node.value, pointer: `${example.pointer}/value` });
      }
    }
  }
  return examples;
}

interface Found {
  value: unknown;
  pointer: string;
  schemaPointer: string;
}

/** Every example of an OpenAPI 3.1 document with the pointer of the schema it must meet. */
function openApiExamples(doc: Node): Found[] {
  const found: Found[] = [];
  const fromSchema = (schema: unknown, pointer: string) => {
    for (const sub of subschemas(schema, pointer)) {
      if (Array.isArray(sub.schema.examples)) {
        for (const [i, value] of sub.schema.examples.entries()) {
          found.push({ value, pointer: `${sub.pointer}/examples/${i}`, schemaPointer: sub.pointer });
        }
      }
      if (sub.schema.example !== undefined) {
        found.push({
          value: sub.schema.example,
          pointer: `${sub.pointer}/example`,
          schemaPointer: sub.pointer,
        });
      }
    }
  };
  const visit = (node: unknown, pointer: string): void => {
    if (Array.isArray(node)) {
      for (const [i, child] of node.entries()) visit(child, `${pointer}/${i}`);
      return;
    }
    if (!isNode(node)) return;
    if (pointer === '/components/schemas') {
      for (const [name, schema] of Object.entries(node))
        fromSchema(schema, `${pointer}/${escapePointer(name)}`);
      return;
    }
    if ('schema' in node && isNode(node.schema)) {
      fromSchema(node.schema, `${pointer}/schema`);
      for (const example of siblingExamples(doc, node, pointer)) {
        found.push({ ...example, schemaPointer: `${pointer}/schema` });
      }
    }
    for (const [key, child] of Object.entries(node)) {
      if (key !== 'schema' && key !== 'examples' && key !== 'example')
        visit(child, `${pointer}/${escapePointer(key)}`);
    }
  };
  visit(doc, '');
  return found;
}

const methods = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];

interface OperationAt {
  path: string;
  method: string;
  operation: Node;
  pointer: string;
  /** Path-level parameters, then the operation's own, resolved. */
  parameters: { node: Node; pointer: string }[];
}

function operationsOf(doc: Node): OperationAt[] {
  const operations: OperationAt[] = [];
  // The events a receiver gets (`webhooks`) are operations too: their bodies show examples as well.
  const entries = ['paths', 'webhooks'].flatMap((section) =>
    Object.entries((doc[section] ?? {}) as Record<string, unknown>).map(
      ([path, entry]) => [path, entry, `/${section}/${escapePointer(path)}`] as const,
    ),
  );
  for (const [path, entry, where] of entries) {
    const item = resolve(doc, entry, where);
    if (!item) continue;
    const shared = Array.isArray(item.node.parameters) ? item.node.parameters : [];
    for (const method of methods) {
      const operation = item.node[method];
      if (!isNode(operation)) continue;
      const pointer = `${item.pointer}/${method}`;
      const own = Array.isArray(operation.parameters) ? operation.parameters : [];
      const parameters = [
        ...shared.map((p, i) => resolve(doc, p, `${item.pointer}/parameters/${i}`)),
        ...own.map((p, i) => resolve(doc, p, `${pointer}/parameters/${i}`)),
      ].filter((p): p is { node: Node; pointer: string } => p !== undefined);
      operations.push({ path, method, operation, pointer, parameters });
    }
  }
  return operations;
}

/** A media type shows an example when it or its schema (followed through `$ref`) gives one. */
function mediaTypeShowsExample(doc: Node, mediaType: Node, pointer: string): boolean {
  if (hasOwnExample(mediaType)) return true;
  const schema = resolve(doc, mediaType.schema, `${pointer}/schema`);
  return schema !== undefined && hasOwnExample(schema.node);
}

/** Operations, parameters and request bodies with no example, each named once where it is written. */
function missingOpenApiExamples(doc: Node): ExampleProblem[] {
  const problems = new Map<string, string>();
  for (const { path, method, operation, pointer, parameters } of operationsOf(doc)) {
    const name = String(operation.operationId ?? `${method.toUpperCase()} ${path}`);
    for (const parameter of parameters) {
      const schema = resolve(doc, parameter.node.schema, `${parameter.pointer}/schema`);
      if (!hasOwnExample(parameter.node) && !(schema && hasOwnExample(schema.node))) {
        problems.set(parameter.pointer, `parameter ${String(parameter.node.name)} has no example`);
      }
    }
    const body = resolve(doc, operation.requestBody, `${pointer}/requestBody`);
    for (const [type, mediaType] of Object.entries((body?.node.content ?? {}) as Record<string, Node>)) {
      const where = `${body?.pointer}/content/${escapePointer(type)}`;
      if (!mediaTypeShowsExample(doc, mediaType, where)) {
        problems.set(where, `the ${type} request body of ${name} has no example`);
      }
    }
    for (const [status, entry] of Object.entries((operation.responses ?? {}) as Record<string, unknown>)) {
      const response = resolve(doc, entry, `${pointer}/responses/${status}`);
      for (const [type, mediaType] of Object.entries(
        (response?.node.content ?? {}) as Record<string, Node>,
      )) {
        const where = `${response?.pointer}/content/${escapePointer(type)}`;
        if (!mediaTypeShowsExample(doc, mediaType, where)) {
          problems.set(where, `the ${status} ${type} answer of ${name} has no example`);
        }
      }
    }
  }
  return [...problems].map(([pointer, message]) => ({ pointer, message }));
}

/** `/uploads/{upload_id}` → a regular expression capturing each parameter by name. */
function pathPattern(template: string): RegExp {
  const source = template
    .split(/(\{[^}]+\})/)
    .map((part) => {
      const name = /^\{([^}]+)\}$/.exec(part)?.[1];
      return name ? `(?<${name.replace(/\W/g, '_')}>[^/]+)` : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    })
    .join('');
  return new RegExp(`^${source}$`);
}

/** Why a URL on the contract's server is not a call any of its operations accepts; undefined when one does. */
function refusedCall(
  url: URL,
  operations: OperationAt[],
  check: (pointer: string, value: unknown) => string | undefined,
): string | undefined {
  const candidates = operations.filter((op) => pathPattern(op.path).test(url.pathname));
  if (candidates.length === 0) return `no path of the contract is ${url.pathname}`;
  const reasons: string[] = [];
  for (const op of candidates) {
    const match = pathPattern(op.path).exec(url.pathname);
    const faults: string[] = [];
    const known = new Set<string>();
    for (const { node, pointer } of op.parameters) {
      const name = String(node.name);
      let value: string | undefined;
      if (node.in === 'path') value = match?.groups?.[name.replace(/\W/g, '_')];
      else if (node.in === 'query') {
        known.add(name);
        const all = url.searchParams.getAll(name);
        if (all.length > 1) faults.push(`query ${name} is given ${all.length} times`);
        value = all[0];
      } else continue;
      if (value === undefined) {
        if (node.required === true) faults.push(`${node.in} ${name} is missing`);
        continue;
      }
      const decoded = node.in === 'path' ? decodeURIComponent(value) : value;
      const fault = isNode(node.schema) ? check(`${pointer}/schema`, decoded) : undefined;
      if (fault) faults.push(`${node.in} ${name} ${JSON.stringify(decoded)}: ${fault}`);
    }
    for (const name of url.searchParams.keys()) {
      if (!known.has(name)) faults.push(`query ${name} is not a parameter of it`);
    }
    if (faults.length === 0) return undefined;
    reasons.push(`${String(op.operation.operationId)}: ${faults.join('; ')}`);
  }
  return reasons.join(' | ');
}

function* stringsIn(value: unknown, pointer: string): Generator<{ text: string; pointer: string }> {
  if (typeof value === 'string') yield { text: value, pointer };
  else if (Array.isArray(value))
    for (const [i, child] of value.entries()) yield* stringsIn(child, `${pointer}/${i}`);
  else if (isNode(value))
    for (const [key, child] of Object.entries(value))
      yield* stringsIn(child, `${pointer}/${escapePointer(key)}`);
}

/** Everything wrong with the examples of a bundled OpenAPI 3.1 document (no external `$ref`s). */
export function openApiExampleProblems(doc: Node): ExampleProblem[] {
  const check = validatorFor(doc, '2020-12');
  const problems = missingOpenApiExamples(doc);
  const operations = operationsOf(doc);
  const servers = ((doc.servers ?? []) as { url?: string }[])
    .map((server) => server.url)
    .filter((url): url is string => typeof url === 'string' && /^https?:\/\//.test(url))
    .map((url) => url.replace(/\/$/, ''));
  for (const example of openApiExamples(doc)) {
    const fault = check(example.schemaPointer, example.value);
    if (fault)
      problems.push({ pointer: example.pointer, message: `the example does not match its schema: ${fault}` });
    for (const { text, pointer } of stringsIn(example.value, example.pointer)) {
      const server = servers.find((base) => text.startsWith(`${base}/`));
      if (!server) continue;
      const url = new URL(text);
      url.pathname = url.pathname.slice(new URL(server).pathname.replace(/\/$/, '').length);
      const refused = refusedCall(url, operations, check);
      if (refused)
        problems.push({
          pointer,
          message: `the URL in the example is not a call the contract accepts: ${refused}`,
        });
    }
  }
  return problems;
}

/**
 * Everything wrong with the examples of a parsed AsyncAPI 3 document (its `$ref`s resolved, as
 * the parser's `document.json()` gives it): every message has an example, each message example's
 * payload and headers meet the message's schemas, and each schema's examples meet the schema.
 */
export function asyncApiExampleProblems(doc: Node): ExampleProblem[] {
  const check = validatorFor(doc, 'draft-07');
  const problems: ExampleProblem[] = [];
  const messages = ((doc.components as Node | undefined)?.messages ?? {}) as Record<string, unknown>;
  for (const [name, entry] of Object.entries(messages)) {
    const message = resolve(doc, entry, `/components/messages/${escapePointer(name)}`);
    if (!message) continue;
    const examples = Array.isArray(message.node.examples) ? message.node.examples : [];
    if (examples.length === 0) {
      problems.push({ pointer: message.pointer, message: `message ${name} has no example` });
    }
    for (const [i, example] of examples.entries()) {
      if (!isNode(example)) continue;
      for (const part of ['payload', 'headers'] as const) {
        if (example[part] === undefined) continue;
        if (!isNode(message.node[part])) {
          problems.push({
            pointer: `${message.pointer}/examples/${i}/${part}`,
            message: `message ${name} has no ${part} schema`,
          });
          continue;
        }
        const fault = check(`${message.pointer}/${part}`, example[part]);
        if (fault) {
          problems.push({
            pointer: `${message.pointer}/examples/${i}/${part}`,
            message: `the example's ${part} does not match message ${name}: ${fault}`,
          });
        }
      }
    }
  }
  // The parser inlines each `$ref`d schema wherever it is used: each is checked once, where its
  // pointer is shortest (its own name under components, rather than a copy inside another).
  const places = new Map<Node, string>();
  const schemas = ((doc.components as Node | undefined)?.schemas ?? {}) as Record<string, unknown>;
  for (const [name, schema] of Object.entries(schemas)) {
    for (const sub of subschemas(schema, `/components/schemas/${escapePointer(name)}`)) {
      const known = places.get(sub.schema);
      if (known === undefined || sub.pointer.length < known.length) places.set(sub.schema, sub.pointer);
    }
  }
  for (const [schema, pointer] of places) {
    if (!Array.isArray(schema.examples)) continue;
    for (const [i, value] of schema.examples.entries()) {
      const fault = check(pointer, value);
      if (fault) {
        problems.push({
          pointer: `${pointer}/examples/${i}`,
          message: `the example does not match its schema: ${fault}`,
        });
      }
    }
  }
  return problems;
}
