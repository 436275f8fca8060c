/**
 * The browser builds of the mini-app bridge, each one ES module with nothing to resolve:
 * `client/dist/runtime.browser.js`, which a host serves to apps at `/_svc/sdk.js` (DESIGN §10),
 * and `client/dist/host.browser.js`, for host pages that load no bundler (the dev-server's).
 * The runtime is loaded by every app in a car: it must stay small, and the build fails past
 * `maxRuntimeGzipBytes`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { buildSync } from 'esbuild';
import { repoRoot } from './repo-root.ts';

export const runtimeBundle = join(repoRoot, 'client/dist/runtime.browser.js');
export const hostBundle = join(repoRoot, 'client/dist/host.browser.js');

/** The most the runtime may weigh gzipped (issue 14): what a car downloads for every app. */
export const maxRuntimeGzipBytes = 16 * 1024;

export interface BundleSize {
  file: string;
  bytes: number;
  gzipBytes: number;
}

function bundle(entry: string, outfile: string): BundleSize {
  buildSync({
    entryPoints: [join(repoRoot, entry)],
    outfile,
    bundle: true,
    format: 'esm',
    platform: 'browser',
    // What the hosts' browsers run (Chromium-based in cars, any current browser in development).
    target: 'es2022',
    minify: true,
    legalComments: 'none',
    logLevel: 'warning',
  });
  const code = readFileSync(outfile);
  return { file: outfile, bytes: code.length, gzipBytes: gzipSync(code, { level: 9 }).length };
}

/** Builds both bundles; throws when the runtime is over its size. */
export function buildBrowserBundles(): { runtime: BundleSize; host: BundleSize } {
  const runtime = bundle('client/src/runtime/index.ts', runtimeBundle);
  const host = bundle('client/src/host/index.ts', hostBundle);
  if (runtime.gzipBytes > maxRuntimeGzipBytes) {
    throw new Error(
      `client/dist/runtime.browser.js is ${runtime.gzipBytes} bytes gzipped, over its ${maxRuntimeGzipBytes}: ` +
        'every mini-app loads it; keep what it imports small (no jose, no API client)',
    );
  }
  return { runtime, host };
}

export function describeSize({ file, bytes, gzipBytes }: BundleSize): string {
  const kib = (n: number) => `${(n / 1024).toFixed(1)} KiB`;
  return `${file.slice(repoRoot.length + 1)}: ${kib(bytes)}, ${kib(gzipBytes)} gzipped`;
}
