/**
 * Builds the web console (console/, Vite) into console/dist, which the service serves at /console.
 * `buildConsole(outDir)` builds elsewhere too: the browser tests build the source they test.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';
import { repoRoot } from './repo-root.ts';

export const consoleDist = join(repoRoot, 'console/dist');

export async function buildConsole(outDir: string = consoleDist): Promise<void> {
  await build({
    configFile: join(repoRoot, 'console/vite.config.ts'),
    build: { outDir, emptyOutDir: true },
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await buildConsole();
  console.log(`built ${consoleDist}`);
}
