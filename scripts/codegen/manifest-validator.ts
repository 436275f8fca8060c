/**
 * generated/manifest-validator.cjs: the contract's Manifest schema compiled once, by ajv's standalone
 * code generation, into the one validator the CLI, the server and the dev-server share (through
 * `@svc/manifest`). Options are the ones every side needs: all errors, not the first, and `verbose`,
 * so that an error carries the value it is about (the CLI's messages quote it).
 *
 * CommonJS, because ajv's standalone code loads its runtime helpers (`ucs2length`, `equal`) with
 * `require` even when asked for ES modules; Node, vitest and esbuild all import a `.cjs` as is.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import standalone from 'ajv/dist/standalone/index.js';
import { banner } from './banner.ts';
import type { OpenApiDocument } from './openapi-bundle.ts';

// Keywords of OpenAPI's Schema Object that JSON Schema does not have: annotations only.
const openApiAnnotations = ['example', 'discriminator', 'xml', 'externalDocs'];
// Schema keywords whose value is a map of schemas by name, and those whose value is data.
const schemaMapKeywords = new Set(['properties', 'patternProperties', '$defs', 'dependentSchemas']);
const valueKeywords = new Set(['enum', 'const', 'default', 'examples', 'example']);

/**
 * One schema of the contract as a self-contained JSON Schema (draft 2020-12, as OpenAPI 3.1 has it):
 * the component schemas it refers to become its `$defs`, and the `x-` extensions, which are for
 * codegen, are left out so that ajv's strict mode can refuse any keyword it does not know.
 */
export function contractSchema(doc: OpenApiDocument, name: string): Record<string, unknown> {
  const schemas = (doc.components?.schemas ?? {}) as Record<string, unknown>;
  const prefix = '#/components/schemas/';
  const defs: Record<string, unknown> = {};
  const copySchema = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(copySchema);
    if (node === null || typeof node !== 'object') return node;
    const copy: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(node)) {
      if (key.startsWith('x-')) continue;
      if (key === '$ref' && typeof value === 'string' && value.startsWith(prefix)) {
        const target = value.slice(prefix.length);
        if (!(target in defs)) {
          defs[target] = true; // taken before copying, so a recursive schema ends
          defs[target] = copySchema(schemas[target]);
        }
        copy[key] = `#/$defs/${target}`;
      } else if (schemaMapKeywords.has(key) && value !== null && typeof value === 'object') {
        // Keys here are property names, which may well start with `x-`.
        copy[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, copySchema(v)]));
      } else if (valueKeywords.has(key)) {
        copy[key] = value;
      } else {
        copy[key] = copySchema(value);
      }
    }
    return copy;
  };
  const root = copySchema(schemas[name]);
  if (root === null || typeof root !== 'object') throw new Error(`openapi: no components.schemas.${name}`);
  // Sorted, so that the output does not depend on the order the references were met in.
  const sortedDefs = Object.fromEntries(Object.entries(defs).sort(([a], [b]) => (a < b ? -1 : 1)));
  return { ...root, $defs: sortedDefs };
}

export function generateManifestValidator(doc: OpenApiDocument): string {
  const ajv = new Ajv2020({
    strict: true,
    allErrors: true,
    verbose: true,
    code: { source: true, lines: true },
  });
  ajv.addVocabulary(openApiAnnotations);
  const validate = ajv.compile(contractSchema(doc, 'Manifest'));
  // A CommonJS module: its default export is under `default` once imported from an ES module.
  const code = standalone.default(ajv, validate);
  return `${banner('openapi/components/schemas/Manifest.yaml')}${code}\n`;
}

/** Types of generated/manifest-validator.cjs, for TypeScript. */
export function generateManifestValidatorTypes(): string {
  return [
    banner('openapi/components/schemas/Manifest.yaml'),
    "import type { ErrorObject } from 'ajv';",
    "import type { components } from './openapi.ts';",
    '',
    "/** The contract's Manifest schema, compiled with `allErrors` and `verbose`. */",
    'declare const validate: {',
    "  (value: unknown): value is components['schemas']['Manifest'];",
    '  errors?: ErrorObject[] | null;',
    '};',
    'export = validate;',
    '',
  ].join('\n');
}
