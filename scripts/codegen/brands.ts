/** generated/brands.ts: the brand registry, from the Brand schema and its x-native-id-patterns. */
import { banner } from './banner.ts';
import type { OpenApiDocument } from './openapi-bundle.ts';

export function generateBrands(doc: OpenApiDocument): string {
  const schema = doc.components?.schemas?.Brand as
    | { enum?: unknown; 'x-native-id-patterns'?: Record<string, unknown> }
    | undefined;
  if (!schema || !Array.isArray(schema.enum)) {
    throw new Error('openapi: components.schemas.Brand must be a string enum');
  }
  const brands = schema.enum.map(String);
  const patterns = schema['x-native-id-patterns'] ?? {};
  for (const brand of brands) {
    if (!/^[a-z][a-z0-9_]*$/.test(brand)) {
      throw new Error(`openapi: Brand value "${brand}" must be a lowercase wire string`);
    }
    const pattern = patterns[brand];
    if (typeof pattern !== 'string' || !pattern.startsWith('^') || !pattern.endsWith('$')) {
      throw new Error(`openapi: Brand x-native-id-patterns.${brand} must be an anchored regular expression`);
    }
    new RegExp(pattern); // fails generation on a pattern JavaScript cannot compile
  }
  for (const key of Object.keys(patterns)) {
    if (!brands.includes(key)) throw new Error(`openapi: x-native-id-patterns names unknown brand "${key}"`);
  }

  const lines = [
    banner('openapi/components/schemas/Brand.yaml'),
    '/** The allowed brand wire strings, in the order of the contract. */',
    `export const brands = [${brands.map((b) => `'${b}'`).join(', ')}] as const;`,
    '',
    'export type Brand = (typeof brands)[number];',
    '',
    '/** Per brand, the format of the native id that follows `<brand>:` in a device id. */',
    'export const nativeIdPatterns: { readonly [B in Brand]: RegExp } = {',
    ...brands.map((b) => `  ${b}: /${String(patterns[b]).replaceAll('/', '\\/')}/,`),
    '};',
    '',
  ];
  return lines.join('\n');
}
