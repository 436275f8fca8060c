/**
 * The files the dev-server sends the browser: its host page and panel (`cli/src/dev/assets`), and
 * the SDK's browser bundles of the host bridge and the runtime (`client/dist`, made by
 * `npm run build:sdk`). The CLI's build copies all of them into `cli/dist/dev-assets`, so the
 * bundled `svc` needs nothing of the repository; from the sources they are read where they are.
 */
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CliError } from '../errors.ts';

export const devAssetNames = ['host.html', 'panel.js', 'panel.css', 'host.browser.js', 'runtime.browser.js'];

const here = dirname(fileURLToPath(import.meta.url));

/** Where a bundled `svc` (cli/dist/svc.js or a chunk under cli/dist/chunks) or the sources keep them. */
const candidates = (name: string) => [
  join(here, 'dev-assets', name),
  join(here, '..', 'dev-assets', name),
  join(here, 'assets', name),
  join(here, '..', '..', '..', 'client', 'dist', name),
];

const cache = new Map<string, { path: string; bytes: Buffer }>();

export async function devAsset(name: string): Promise<{ path: string; bytes: Buffer }> {
  const cached = cache.get(name);
  if (cached) return cached;
  for (const path of candidates(name)) {
    try {
      const found = { path, bytes: await readFile(path) };
      cache.set(name, found);
      return found;
    } catch {}
  }
  throw new CliError(
    `the dev-server's ${name} is missing from this installation of svc` +
      (name.endsWith('.browser.js') ? ' (in a checkout of svc, run `npm run build:sdk`)' : ''),
  );
}
