/**
 * Bundles the `svc` CLI with esbuild into cli/dist: one small entry that parses the command line,
 * and a chunk per command's work, loaded only when that command runs (fast `svc --help`).
 */
import { chmodSync, copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { devAssetNames } from '../cli/src/dev/dev-assets.ts';
import { sourceCondition } from './build-sdk.ts';
import { repoRoot } from './repo-root.ts';

export const cliDist = join(repoRoot, 'cli/dist');

export async function buildCli(): Promise<void> {
  rmSync(cliDist, { recursive: true, force: true });
  await build({
    entryPoints: { svc: join(repoRoot, 'cli/src/main.ts') },
    outdir: cliDist,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    // The SDK's TypeScript source, as everywhere in this repository (its dist/ is for npm users);
    // `module` is what esbuild asks for when given no conditions of its own.
    conditions: [sourceCondition, 'module'],
    // A native module: installed from its platform package, never bundled.
    external: ['@napi-rs/keyring'],
    // jsonc-parser's `main` is a UMD build that loads its parts with a require() esbuild cannot
    // follow; its ES module build bundles as any other.
    alias: { 'jsonc-parser': 'jsonc-parser/lib/esm/main.js' },
    // Bundled CommonJS dependencies may still call require().
    banner: {
      js: "import { createRequire as __svcCreateRequire } from 'node:module'; const require = __svcCreateRequire(import.meta.url);",
    },
    chunkNames: 'chunks/[name]-[hash]',
    legalComments: 'none',
    logLevel: 'warning',
  });
  chmodSync(join(cliDist, 'svc.js'), 0o755);
  copyDevAssets();
}

/**
 * What `svc dev` sends the browser (cli/src/dev/dev-assets.ts): its host page and panel, and the
 * SDK's browser bundles, which `npm run build:sdk` made first.
 */
function copyDevAssets(): void {
  const target = join(cliDist, 'dev-assets');
  mkdirSync(target, { recursive: true });
  for (const name of devAssetNames) {
    const from = name.endsWith('.browser.js')
      ? join(repoRoot, 'client/dist', name)
      : join(repoRoot, 'cli/src/dev/assets', name);
    copyFileSync(from, join(target, name));
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await buildCli();
  process.stdout.write('built cli/dist/svc.js\n');
}
