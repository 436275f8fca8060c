/**
 * `npm run generate`: turns the contract (openapi/, asyncapi/) into generated/.
 * Deterministic: the same contract always gives byte-identical files, so CI can diff them.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleAsyncApi } from './codegen/asyncapi-bundle.ts';
import { jsonBanner, jsonBannerKey } from './codegen/banner.ts';
import { generateBrands } from './codegen/brands.ts';
import { generateManifestValidator, generateManifestValidatorTypes } from './codegen/manifest-validator.ts';
import { generateMqtt } from './codegen/mqtt.ts';
import {
  generateMqttPayloadValidators,
  generateMqttPayloadValidatorTypes,
} from './codegen/mqtt-payload-validators.ts';
import { bundleOpenApi } from './codegen/openapi-bundle.ts';
import { generateOpenApiTypes } from './codegen/openapi-types.ts';
import { generatePatterns } from './codegen/patterns.ts';
import { generateRoutes } from './codegen/routes.ts';
import { generateSdkModels } from './codegen/sdk-models.ts';
import { repoRoot } from './repo-root.ts';

/** Every file of generated/, by name, as the contract in `root` makes it. */
export async function renderGenerated(root: string): Promise<Record<string, string>> {
  const doc = bundleOpenApi(root);
  const asyncapiPath = join(root, 'asyncapi/asyncapi.yaml');
  const bundled = { [jsonBannerKey]: jsonBanner('openapi/'), ...doc };
  const asyncapi = await bundleAsyncApi(root);
  return {
    'openapi.json': `${JSON.stringify(bundled, null, 2)}\n`,
    'openapi.ts': await generateOpenApiTypes(doc),
    'routes.ts': generateRoutes(doc),
    'sdk-models.ts': generateSdkModels(doc),
    'brands.ts': generateBrands(doc),
    'patterns.ts': generatePatterns(doc),
    'manifest-validator.cjs': generateManifestValidator(doc),
    'manifest-validator.d.cts': generateManifestValidatorTypes(),
    'asyncapi.json': asyncapi.json,
    'asyncapi.yaml': asyncapi.yaml,
    'mqtt.ts': await generateMqtt(asyncapiPath),
    'mqtt-payload-validators.cjs': await generateMqttPayloadValidators(asyncapiPath),
    'mqtt-payload-validators.d.cts': await generateMqttPayloadValidatorTypes(asyncapiPath),
  };
}

export async function generate(root: string, outDir: string): Promise<string[]> {
  const files = await renderGenerated(root);
  mkdirSync(outDir, { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(outDir, name), text);
  return Object.keys(files);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const written = await generate(repoRoot, join(repoRoot, 'generated'));
  process.stdout.write(`generated/: ${written.join(', ')}\n`);
  // Imported only now: the settings read generated/openapi.json, just written.
  const { configurationPage, renderConfigurationPage } = await import('./generate-config-docs.ts');
  writeFileSync(join(repoRoot, configurationPage), renderConfigurationPage());
  process.stdout.write(`${configurationPage}: from server/src/config.ts\n`);
}
