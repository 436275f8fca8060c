/**
 * Builds `@svc/sdk` into client/dist: ES modules and `.d.ts` by tsc, with the generated modules
 * the SDK imports (brands, patterns, topics, the OpenAPI types and the v4 models) compiled in
 * beside its own, so the package never reaches outside itself.
 *
 * tsc mirrors the repository from its top (`client/dist/client/src/…`, `client/dist/generated/…`)
 * so that the relative imports of the source (`../../generated/brands.ts`) hold in the package
 * unchanged; `exports` in client/package.json names the entry files.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BundleSize, buildBrowserBundles, describeSize, maxRuntimeGzipBytes } from './build-runtime.ts';
import { repoRoot } from './repo-root.ts';

export const sdkRoot = join(repoRoot, 'client');
export const sdkDist = join(sdkRoot, 'dist');

/** The condition under which this repository's workspaces read the SDK's TypeScript source. */
export const sourceCondition = 'svc-source';

type ExportTarget = string | { [condition: string]: ExportTarget };

/** Every file `exports` points published code at (all conditions but the source one). */
export function exportedFiles(): string[] {
  const manifest = JSON.parse(readFileSync(join(sdkRoot, 'package.json'), 'utf8')) as {
    exports: Record<string, ExportTarget>;
  };
  const files: string[] = [];
  const walk = (target: ExportTarget): void => {
    if (typeof target === 'string') files.push(target);
    else
      for (const [condition, inner] of Object.entries(target)) if (condition !== sourceCondition) walk(inner);
  };
  for (const target of Object.values(manifest.exports)) walk(target);
  return files;
}

/** Builds the package, then the browser bundles of the runtime and the host (build-runtime.ts). */
export function buildSdk(): { runtime: BundleSize; host: BundleSize } {
  rmSync(sdkDist, { recursive: true, force: true });
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const run = spawnSync(process.execPath, [tsc, '-p', join(sdkRoot, 'tsconfig.build.json')], {
    cwd: repoRoot,
    encoding: 'utf8',
  });
  if (run.status !== 0) {
    throw new Error(`tsc could not build @svc/sdk:\n${run.stdout}${run.stderr}`);
  }
  const missing = exportedFiles().filter((file) => !existsSync(join(sdkRoot, file)));
  if (missing.length > 0) {
    throw new Error(
      `client/package.json exports files the build did not make: ${missing.join(', ')}; ` +
        'each entry needs its source under client/src',
    );
  }
  return buildBrowserBundles();
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { runtime, host } = buildSdk();
  process.stdout.write(
    'built @svc/sdk into client/dist\n' +
      `  ${describeSize(runtime)} (at most ${maxRuntimeGzipBytes / 1024} KiB gzipped)\n` +
      `  ${describeSize(host)}\n`,
  );
}
