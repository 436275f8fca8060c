/** generated/manifest-validator.cjs: the contract's Manifest schema, compiled once by `npm run generate`. */
import assert from 'node:assert/strict';
import { test } from 'vitest';
import validate from '../../generated/manifest-validator.cjs';
import contract from '../../generated/openapi.json' with { type: 'json' };
import { generateManifestValidator } from '../codegen/manifest-validator.ts';
import { bundleOpenApi } from '../codegen/openapi-bundle.ts';
import { repoRoot } from '../repo-root.ts';

test('when the validator is generated twice then the code is byte-identical', () => {
  const doc = bundleOpenApi(repoRoot);
  assert.equal(generateManifestValidator(doc), generateManifestValidator(bundleOpenApi(repoRoot)));
});

test("when the contract's own examples are validated then they pass, and each error carries its value", () => {
  for (const example of contract.components.schemas.Manifest.examples) {
    assert.ok(validate(example), JSON.stringify(validate.errors));
  }
  assert.equal(validate({ id: 'Not-Reverse-DNS' }), false);
  const idError = validate.errors?.find((error) => error.instancePath === '/id');
  // `verbose`: the CLI quotes the value in its messages.
  assert.equal(idError?.data, 'Not-Reverse-DNS');
  // `allErrors`: the missing fields are all named, not only the first.
  const missing = validate.errors?.filter((error) => error.keyword === 'required').length;
  assert.equal(missing, 4);
});
