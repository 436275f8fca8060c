/**
 * Builds the reference page GET /docs serves: Redoc's prerendered HTML of generated/openapi.json,
 * with its script served by the service itself instead of a CDN (the page must work offline).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { repoRoot } from './repo-root.ts';

const redoclyCli = join(repoRoot, 'node_modules/@redocly/cli');
// Redocly CLI ships the same Redoc build it links from its CDN; serve that copy.
const localScript = join(redoclyCli, 'lib/chunks/redoc.standalone.js');

export function buildDocs(outDir: string): void {
  mkdirSync(outDir, { recursive: true });
  const page = join(outDir, 'index.html');
  execFileSync(
    process.execPath,
    [
      join(redoclyCli, 'bin/cli.js'),
      'build-docs',
      join(repoRoot, 'generated/openapi.json'),
      '--output',
      page,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const html = readFileSync(page, 'utf8');
  const cdnScript = /https:\/\/cdn\.redocly\.com\/redoc\/[^"']+\/redoc\.standalone\.js/g;
  if (!cdnScript.test(html))
    throw new Error('build-docs: the page no longer loads Redoc from where this script expects');
  // Redoc's router runs on the hash (/docs#/mini-apps) but prerenders its links as site paths
  // (/mini-apps): opened in a new tab, those land on the API's 404. Write them as the hash
  // links the page itself makes once it runs; the contracts the description links are files.
  const sitePathLink = /href="\/(?!docs\/|openapi\.json"|asyncapi\.(?:yaml|json)")/g;
  if (!sitePathLink.test(html))
    throw new Error('build-docs: the page no longer links its sections as this script expects');
  // Redoc reports its use to Redocly's servers unless told not to; the page talks to this service only.
  const telemetry = '"disableTelemetry":false';
  if (!html.includes(telemetry))
    throw new Error('build-docs: the page no longer sets disableTelemetry as this script expects');
  const offline = html
    .replace(telemetry, '"disableTelemetry":true')
    .replace(sitePathLink, 'href="#/')
    .replace(cdnScript, '/docs/redoc.standalone.js')
    // The CDN copy's integrity hash need not match the local copy; the script comes from this origin.
    .replace(/\s+integrity="[^"]*"/g, '')
    .replace(/\s+crossorigin="anonymous"/g, '');
  writeFileSync(page, offline);
  // The credit's logo comes from Redocly's CDN; an image that does not load hides itself.
  const creditLogo = /https:\/\/cdn\.redoc\.ly\/redoc\/logo-mini(-full)?\.svg/g;
  const script = readFileSync(localScript, 'utf8');
  if (!creditLogo.test(script))
    throw new Error('build-docs: the Redoc script no longer loads its logo as this script expects');
  writeFileSync(join(outDir, 'redoc.standalone.js'), script.replace(creditLogo, 'data:,'));
}

export const defaultDocsDir = join(repoRoot, 'server/dist/docs');

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  buildDocs(defaultDocsDir);
  process.stdout.write(`built ${join(dirname(defaultDocsDir), 'docs')}/index.html\n`);
}
