/**
 * The production build of the service and the simulator (esbuild): server/dist/main.js, run with
 * plain `node` by `npm run serve` and `npm run migrate`, the operator's commands beside it, and
 * simulator/dist/svc-car-sim.js.
 *
 * The workspaces' own packages (@svc/sdk, @svc/manifest, @svc/ssh) are bundled from their
 * TypeScript source, as the workspaces read them in development (the `svc-source` condition), so
 * the build needs no dist/ of theirs nor any condition at run time. Every other package stays an
 * import, resolved at run time from node_modules: these are the `dependencies` of the workspaces,
 * which `npm prune --omit=dev` keeps. JSON imports (the contract, server/package.json's version)
 * are inlined.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';
import { sourceCondition } from './build-sdk.ts';
import { repoRoot } from './repo-root.ts';

export const serverBundle = join(repoRoot, 'server/dist/main.js');
export const simulatorBundle = join(repoRoot, 'simulator/dist/svc-car-sim.js');
/** The operator's commands, run with plain `node` as the service is (after `npm prune --omit=dev`). */
const operatorCommands = ['sync-broker-credentials', 'rotate-key-encryption-key'];

/** Everything imported by a bare name is left to Node, except this repository's own workspaces. */
const npmPackagesExternal: Plugin = {
  name: 'npm-packages-external',
  setup(plugin) {
    plugin.onResolve({ filter: /^[^./]/ }, ({ path }) =>
      path.startsWith('@svc/') ? undefined : { path, external: true },
    );
  },
};

async function bundle(entry: string, outfile: string, banner = ''): Promise<void> {
  rmSync(outfile, { force: true });
  await build({
    entryPoints: [join(repoRoot, entry)],
    outfile,
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    conditions: [sourceCondition, 'module'],
    plugins: [npmPackagesExternal],
    // Bundled CommonJS (the validators compiled ahead of time in generated/) still calls require().
    banner: {
      js: `${banner}\nimport { createRequire as __svcCreateRequire } from 'node:module'; const require = __svcCreateRequire(import.meta.url);`,
    },
    legalComments: 'none',
    logLevel: 'warning',
  });
}

export async function buildServer(): Promise<void> {
  // server/dist/docs is build-docs.ts's: only the bundle is replaced.
  await bundle('server/src/main.ts', serverBundle);
  for (const command of operatorCommands) {
    await bundle(`server/src/${command}.ts`, join(repoRoot, `server/dist/${command}.js`));
  }
  await bundle('simulator/src/main.ts', simulatorBundle, '#!/usr/bin/env node');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await buildServer();
  process.stdout.write(`built ${serverBundle} and ${simulatorBundle}\n`);
}
