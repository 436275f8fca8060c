/**
 * The contract's Manifest schema as the one compiled validator every side runs: `npm run generate`
 * compiles it ahead of time (generated/manifest-validator.cjs), so no side compiles it again.
 */
import type { ErrorObject } from 'ajv';
import validate from '../../generated/manifest-validator.cjs';
import type { components } from '../../generated/openapi.ts';

export type Manifest = components['schemas']['Manifest'];

/** What the schema says of `value`: nothing when it is a Manifest, else every error (with its data). */
export function checkManifestSchema(
  value: unknown,
): { manifest: Manifest; errors: readonly [] } | { manifest: undefined; errors: readonly ErrorObject[] } {
  if (validate(value)) return { manifest: value, errors: [] };
  return { manifest: undefined, errors: [...(validate.errors ?? [])] };
}
