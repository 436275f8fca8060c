/**
 * generated/sdk-models.ts: the SDK v4 models, camelCase types and converters for every schema a
 * successful response carries (DESIGN §10). Wire names stay snake_case on the wire only:
 * `toCarStatus(wire)` turns the service's `{device_id, last_seen, …}` into `{deviceId, lastSeen, …}`.
 * Free-form objects (`additionalProperties: true`, such as command `args`), those among them that
 * name some keys they know (`CarState`: a car's `ignition`, `doors_locked`, and any keys of its own)
 * and maps (`additionalProperties: {schema}`) keep their keys as sent: they are data, not fields.
 *
 * The generator knows the schema shapes the contract uses and throws on any other, so a contract
 * change it cannot express fails `npm run generate` instead of making a wrong model.
 */
import { banner } from './banner.ts';
import type { OpenApiDocument } from './openapi-bundle.ts';

type Schema = { [keyword: string]: unknown };

const refPrefix = '#/components/schemas/';

/** Named schemas the models refer to but that are not generated here. */
const imported: Record<string, string> = { Brand: './brands.ts' };

/** snake_case (or one word) → camelCase: `last_seen` → `lastSeen`, `accuracy_m` → `accuracyM`. */
export function camelCase(name: string): string {
  if (!/^[a-z][a-z0-9]*(_[a-z0-9]+)*$/.test(name)) {
    throw new Error(`openapi: property "${name}" is not snake_case; the SDK models cannot name it`);
  }
  return name.replace(/_([a-z0-9])/g, (_, letter: string) => letter.toUpperCase());
}

class ModelWriter {
  readonly schemas: Record<string, Schema>;
  /** Object schemas with properties: each an interface and a converter. */
  readonly models = new Set<string>();
  /** String enums: each a union type. */
  readonly enums = new Set<string>();
  /** Free-form objects with known keys: each a type, its keys as sent. */
  readonly data = new Set<string>();
  readonly imports = new Set<string>();

  constructor(doc: OpenApiDocument) {
    this.schemas = (doc.components?.schemas ?? {}) as Record<string, Schema>;
    for (const name of responseSchemaNames(doc)) {
      // An answer itself is a model, with a converter: its keys are fields, never data.
      if (isData(this.named(name))) {
        throw new Error(
          `openapi: ${name}, an answer, has both properties and additionalProperties; the SDK models cannot name its fields`,
        );
      }
      this.visitNamed(name);
    }
  }

  private visitNamed(name: string): void {
    if (this.models.has(name) || this.enums.has(name) || this.data.has(name)) return;
    if (name in imported) {
      this.imports.add(name);
      return;
    }
    const schema = this.named(name);
    if (isData(schema)) {
      this.data.add(name);
      this.visit(schema);
    } else if (isModel(schema)) {
      this.models.add(name);
      this.visit(schema);
    } else if (schema.type === 'string' && Array.isArray(schema.enum)) {
      this.enums.add(name);
    } else {
      this.visit(schema);
    }
  }

  private visit(schema: Schema): void {
    const ref = refOf(schema);
    if (ref) {
      this.visitNamed(ref);
      return;
    }
    for (const keyword of ['oneOf', 'anyOf', 'allOf'] as const) {
      for (const member of listOf(schema[keyword])) this.visit(member);
    }
    for (const property of Object.values(propertiesOf(schema))) this.visit(property);
    if (isSchema(schema.items)) this.visit(schema.items);
    if (isSchema(schema.additionalProperties)) this.visit(schema.additionalProperties);
  }

  named(name: string): Schema {
    const schema = this.schemas[name];
    if (!isSchema(schema)) throw new Error(`openapi: components.schemas.${name} is referenced but missing`);
    return schema;
  }

  /** The TypeScript type of a value of `schema` in the models. */
  typeOf(schema: Schema, indent: string): string {
    const ref = refOf(schema);
    if (ref) {
      if (this.models.has(ref) || this.enums.has(ref) || this.imports.has(ref) || this.data.has(ref))
        return ref;
      return this.typeOf(this.named(ref), indent);
    }
    if (schema.oneOf || schema.anyOf) {
      const members = [...listOf(schema.oneOf), ...listOf(schema.anyOf)];
      return union(members.map((member) => this.typeOf(member, indent)));
    }
    if (schema.allOf && schema.type === undefined) {
      const members = listOf(schema.allOf);
      if (members.length !== 1) throw new Error('openapi: allOf without a type must have exactly one member');
      return this.typeOf(members[0] as Schema, indent);
    }
    // allOf beside a type only narrows it (Text, MultilineText, Version): the type says it all.
    const types = typesOf(schema);
    if (Array.isArray(schema.enum)) {
      const literals = schema.enum.map(literal);
      if (types.includes('null') && !schema.enum.includes(null)) literals.push('null');
      return union(literals);
    }
    return union(types.map((type) => this.typeOfType(type, schema, indent)));
  }

  private typeOfType(type: string, schema: Schema, indent: string): string {
    switch (type) {
      case 'string':
        return 'string';
      case 'integer':
      case 'number':
        return 'number';
      case 'boolean':
        return 'boolean';
      case 'null':
        return 'null';
      case 'array': {
        if (!isSchema(schema.items)) throw new Error('openapi: an array schema without items');
        const item = this.typeOf(schema.items, indent);
        return /[ |]/.test(item) && !item.startsWith('{') ? `(${item})[]` : `${item}[]`;
      }
      case 'object':
        return this.objectType(schema, indent);
      default:
        throw new Error(`openapi: type "${type}" is not one the SDK models know`);
    }
  }

  /** `{ camelName: type; … }` for an inline object, `{ [key: string]: … }` for a free-form one. */
  objectType(schema: Schema, indent: string): string {
    if (isData(schema)) return this.dataType(schema, indent);
    const properties = propertiesOf(schema);
    if (Object.keys(properties).length === 0) {
      const values = schema.additionalProperties;
      // Free-form data, keys as sent.
      if (values === undefined || values === true) return '{ [key: string]: unknown }';
      if (isSchema(values)) return `{ [key: string]: ${this.typeOf(values, indent)} }`;
      throw new Error('openapi: an object schema with neither properties nor additionalProperties');
    }
    return `{\n${this.members(schema, `${indent}  `)}${indent}}`;
  }

  /**
   * `{ wire_name?: type; …; [key: string]: unknown }` for a free-form object with known keys: the
   * keys stay as sent, known or not, so the known ones must need no converting either.
   */
  dataType(schema: Schema, indent: string): string {
    const inner = `${indent}  `;
    const required = new Set(listOfStrings(schema.required));
    let text = '';
    for (const [wireName, property] of Object.entries(propertiesOf(schema))) {
      if (this.needsConversion(property)) {
        throw new Error(
          `openapi: "${wireName}" of a free-form object has fields of its own; such an object keeps its keys as sent`,
        );
      }
      text += docComment(property, undefined, inner);
      text += `${inner}${wireName}${required.has(wireName) ? '' : '?'}: ${this.typeOf(property, inner)};\n`;
    }
    return `{\n${text}${inner}[key: string]: unknown;\n${indent}}`;
  }

  members(schema: Schema, indent: string): string {
    if (schema.additionalProperties !== undefined && schema.additionalProperties !== false) {
      throw new Error(
        'openapi: an object with both properties and additionalProperties is not one the SDK models know',
      );
    }
    const required = new Set(listOfStrings(schema.required));
    const seen = new Map<string, string>();
    let text = '';
    for (const [wireName, property] of Object.entries(propertiesOf(schema))) {
      const name = camelCase(wireName);
      const clash = seen.get(name);
      if (clash) throw new Error(`openapi: properties "${clash}" and "${wireName}" both become "${name}"`);
      seen.set(name, wireName);
      const optional = required.has(wireName) ? '' : '?';
      text += docComment(property, wireName, indent);
      text += `${indent}${name}${optional}: ${this.typeOf(property, indent)};\n`;
    }
    return text;
  }

  /** Whether a wire value of `schema` must be rebuilt to be a model value (it has named fields somewhere). */
  needsConversion(schema: Schema): boolean {
    const ref = refOf(schema);
    if (ref)
      return (
        this.models.has(ref) ||
        (!this.enums.has(ref) &&
          !this.imports.has(ref) &&
          !this.data.has(ref) &&
          this.needsConversion(this.named(ref)))
      );
    if (isData(schema)) return false;
    if (schema.oneOf || schema.anyOf) {
      return [...listOf(schema.oneOf), ...listOf(schema.anyOf)].some((member) =>
        this.needsConversion(member),
      );
    }
    if (schema.allOf && schema.type === undefined)
      return listOf(schema.allOf).some((m) => this.needsConversion(m));
    if (Object.keys(propertiesOf(schema)).length > 0) return true;
    if (isSchema(schema.items)) return this.needsConversion(schema.items);
    if (isSchema(schema.additionalProperties)) return this.needsConversion(schema.additionalProperties);
    return false;
  }

  /** An expression that turns the wire value `expr` of `schema` into its model value. */
  convert(schema: Schema, expr: string, depth: number, indent: string): string {
    if (!this.needsConversion(schema)) return expr;
    const ref = refOf(schema);
    if (ref) {
      if (this.models.has(ref)) return `to${ref}(${expr})`;
      return this.convert(this.named(ref), expr, depth, indent);
    }
    const members = [...listOf(schema.oneOf), ...listOf(schema.anyOf)];
    if (members.length > 0) {
      const nonNull = members.filter((member) => !isNullSchema(member));
      if (nonNull.length !== 1)
        throw new Error('openapi: a oneOf the SDK models can convert is one schema or null');
      const converted = this.convert(nonNull[0] as Schema, expr, depth, indent);
      return nonNull.length < members.length ? `${expr} === null ? null : ${converted}` : converted;
    }
    if (schema.allOf && schema.type === undefined) {
      return this.convert(listOf(schema.allOf)[0] as Schema, expr, depth, indent);
    }
    const types = typesOf(schema);
    const nullable = types.includes('null');
    const converted = types.includes('array')
      ? this.convertArray(schema, expr, depth, indent)
      : this.convertObject(schema, expr, depth, indent);
    return nullable ? `${expr} === null ? null : ${converted}` : converted;
  }

  private convertArray(schema: Schema, expr: string, depth: number, indent: string): string {
    const item = `item${depth || ''}`;
    const converted = this.convert(schema.items as Schema, item, depth + 1, indent);
    // An object literal as an arrow's body needs parentheses, or it reads as a block.
    return `${expr}.map((${item}) => ${converted.startsWith('{') ? `(${converted})` : converted})`;
  }

  private convertObject(schema: Schema, expr: string, depth: number, indent: string): string {
    const properties = propertiesOf(schema);
    if (Object.keys(properties).length === 0) {
      const entry = `entry${depth || ''}`;
      const converted = this.convert(schema.additionalProperties as Schema, `${entry}[1]`, depth + 1, indent);
      return `Object.fromEntries(Object.entries(${expr}).map((${entry}) => [${entry}[0], ${converted}]))`;
    }
    return `{\n${this.assignments(schema, expr, depth, `${indent}  `)}${indent}}`;
  }

  /** The members of an object literal: `camel: convert(wire.snake)`, optional ones only when present. */
  assignments(schema: Schema, expr: string, depth: number, indent: string): string {
    const required = new Set(listOfStrings(schema.required));
    let text = '';
    for (const [wireName, property] of Object.entries(propertiesOf(schema))) {
      const name = camelCase(wireName);
      const access = `${expr}.${wireName}`;
      const value = this.convert(property, access, depth, indent);
      text += required.has(wireName)
        ? `${indent}${name}: ${value},\n`
        : `${indent}...(${access} === undefined ? {} : { ${name}: ${value} }),\n`;
    }
    return text;
  }
}

/** The named schemas successful responses carry, by `$ref`. */
function responseSchemaNames(doc: OpenApiDocument): string[] {
  const names = new Set<string>();
  const responses = (doc.components as { responses?: Record<string, Schema> } | undefined)?.responses ?? {};
  for (const operations of Object.values(doc.paths)) {
    for (const operation of Object.values(operations)) {
      if (!isSchema(operation) || !isSchema(operation.responses)) continue;
      for (const [status, response] of Object.entries(operation.responses)) {
        if (!/^2\d\d$/.test(status) || !isSchema(response)) continue;
        const ref = typeof response.$ref === 'string' ? response.$ref.split('/').pop() : undefined;
        const resolved = ref ? responses[ref] : response;
        for (const media of Object.values((resolved?.content ?? {}) as Record<string, Schema>)) {
          const name = isSchema(media.schema) ? refOf(media.schema) : undefined;
          if (name) names.add(name);
        }
      }
    }
  }
  return [...names].sort();
}

function isModel(schema: Schema): boolean {
  return (
    typesOf(schema).includes('object') && Object.keys(propertiesOf(schema)).length > 0 && !isData(schema)
  );
}

/** A free-form object that names some keys it knows: data, kept as sent. */
function isData(schema: Schema): boolean {
  return (
    schema.additionalProperties === true &&
    typesOf(schema).includes('object') &&
    Object.keys(propertiesOf(schema)).length > 0
  );
}

function isSchema(value: unknown): value is Schema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isNullSchema(schema: Schema): boolean {
  return schema.type === 'null';
}

function refOf(schema: Schema): string | undefined {
  const ref = schema.$ref;
  if (typeof ref !== 'string') return undefined;
  if (!ref.startsWith(refPrefix)) throw new Error(`openapi: $ref ${ref} is not a component schema`);
  return ref.slice(refPrefix.length);
}

function listOf(value: unknown): Schema[] {
  return Array.isArray(value) ? value.filter(isSchema) : [];
}

function listOfStrings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];
}

function propertiesOf(schema: Schema): Record<string, Schema> {
  return isSchema(schema.properties) ? (schema.properties as Record<string, Schema>) : {};
}

function typesOf(schema: Schema): string[] {
  if (typeof schema.type === 'string') return [schema.type];
  if (Array.isArray(schema.type)) return schema.type.map(String);
  if (isSchema(schema.properties) || schema.additionalProperties !== undefined) return ['object'];
  throw new Error(`openapi: a schema without a type: ${JSON.stringify(schema).slice(0, 120)}`);
}

/** A TypeScript literal type, single-quoted as the rest of the code. */
function literal(value: unknown): string {
  if (typeof value === 'string') {
    // JSON's escapes are TypeScript's; single quotes only where nothing needs escaping.
    return /^[\x20-\x7e]*$/.test(value) && !/['\\]/.test(value) ? `'${value}'` : JSON.stringify(value);
  }
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return String(value);
  throw new Error(`openapi: enum value ${JSON.stringify(value)} is not one the SDK models know`);
}

function union(types: string[]): string {
  return [...new Set(types)].join(' | ');
}

/** The schema's description (first paragraph) and its wire name, as a JSDoc comment. */
function docComment(schema: Schema, wireName: string | undefined, indent: string): string {
  const description =
    typeof schema.description === 'string' ? (schema.description.trim().split(/\n\s*\n/)[0] ?? '') : '';
  const text = [
    description.replace(/\s+/g, ' '),
    wireName && wireName !== camelCase(wireName) ? `\`${wireName}\` on the wire.` : '',
  ]
    .filter(Boolean)
    .join(' ')
    .replaceAll('*/', '*\\/');
  return text ? `${indent}/** ${text} */\n` : '';
}

export function generateSdkModels(doc: OpenApiDocument): string {
  const writer = new ModelWriter(doc);
  const lines: string[] = [
    banner('openapi/ (bundled): the schemas of successful responses'),
    '/**',
    ' * The SDK v4 models: camelCase types of what the service answers, and converters from the wire',
    ' * (snake_case) form. Free-form objects keep their keys as sent. Times stay RFC 3339 strings.',
    ' */',
  ];
  for (const name of [...writer.imports].sort())
    lines.push(`import type { ${name} } from '${imported[name]}';`);
  lines.push("import type { components } from './openapi.ts';", '', "type Wire = components['schemas'];", '');
  for (const name of [...writer.enums].sort()) {
    const schema = writer.named(name);
    lines.push(
      docComment(schema, undefined, '').trimEnd(),
      `export type ${name} = ${writer.typeOf({ ...schema }, '')};`,
      '',
    );
  }
  for (const name of [...writer.data].sort()) {
    const schema = writer.named(name);
    const comment = docComment(schema, undefined, '').trimEnd();
    if (comment) lines.push(comment);
    lines.push(`export type ${name} = ${writer.dataType(schema, '')};`, '');
  }
  for (const name of [...writer.models].sort()) {
    const schema = writer.named(name);
    const comment = docComment(schema, undefined, '').trimEnd();
    if (comment) lines.push(comment);
    lines.push(`export interface ${name} {`, `${writer.members(schema, '  ')}}`, '');
    lines.push(
      `/** The ${name} model of the service's \`${name}\` answer. */`,
      `export function to${name}(wire: Wire['${name}']): ${name} {`,
      `  return {\n${writer.assignments(schema, 'wire', 0, '    ')}  };`,
      '}',
      '',
    );
  }
  return lines.filter((line, index) => line !== '' || lines[index - 1] !== '').join('\n');
}
