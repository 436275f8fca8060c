/**
 * The contracts for people and programs: GET /openapi.json (the bundled HTTP contract),
 * GET /asyncapi.yaml and /asyncapi.json (the bundled MQTT contract, one document in two
 * notations), and GET /docs, the reference page built by `npm run build` (Redoc, served from here:
 * no CDN), which links all three.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import express, { type Router } from 'express';
import { ProblemError } from './problem.ts';

export const docsPage = 'index.html';
export const docsScript = 'redoc.standalone.js';

/** The paths this router answers with GET (and so HEAD, and OPTIONS through `crossOrigin`). */
export const docsPaths = [
  '/openapi.json',
  '/docs',
  `/docs/${docsScript}`,
  '/asyncapi.yaml',
  '/asyncapi.json',
] as const;
const [contractPath, pagePath, scriptPath, asyncYamlPath, asyncJsonPath] = docsPaths;

/** The MQTT contract as generated/ holds it: the same document as YAML and as JSON. */
export interface AsyncContract {
  yaml: string;
  json: string;
}

/**
 * The page may reach this service only: Redoc links a logo, icons and its usage reports from
 * Redocly's servers, which an offline or private deployment must not call. Its own inline
 * scripts (the contract, the colour mode) are allowed by their hashes; its styles are injected
 * at run time, hence inline styles.
 */
function contentSecurityPolicy(html: string): string {
  const hashes = [...html.matchAll(/<script(?![^>]*\ssrc=)[^>]*>([\s\S]*?)<\/script>/g)].map(
    ([, body]) =>
      `'sha256-${createHash('sha256')
        .update(body ?? '')
        .digest('base64')}'`,
  );
  return [
    "default-src 'self'",
    `script-src 'self' ${hashes.join(' ')}`,
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/**
 * `baseUrl`: where this service runs. The contract names the default local address as its
 * server; the docs page and /openapi.json name the real one, so "try it" and generated clients
 * reach this service whatever its PORT or SVC_PUBLIC_URL.
 */
export function docsRouter(
  contract: { servers?: { url: string; description?: string }[] },
  asyncContract: AsyncContract,
  docsDir: string | undefined,
  baseUrl: () => string,
): Router {
  const router = express.Router();
  const contractServer = contract.servers?.[0]?.url;
  const withServer = (url: string) =>
    url === contractServer
      ? contract
      : { ...contract, servers: [{ url, description: 'This service.' }, ...(contract.servers ?? [])] };
  let page: { html: string; url: string; policy: string } | undefined;
  router.get(contractPath, (_req, res) => {
    res.json(withServer(baseUrl()));
  });
  // RFC 9512's media type for YAML.
  router.get(asyncYamlPath, (_req, res) => {
    res.type('application/yaml').send(asyncContract.yaml);
  });
  router.get(asyncJsonPath, (_req, res) => {
    res.type('application/json').send(asyncContract.json);
  });
  router.get(pagePath, (_req, res) => {
    if (!docsDir || !existsSync(join(docsDir, docsPage))) {
      throw new ProblemError(
        503,
        'docs_not_built',
        'The reference page is not built: run `npm run build`, or read /openapi.json.',
      );
    }
    const url = baseUrl();
    if (page?.url !== url) {
      const read = readFileSync(join(docsDir, docsPage), 'utf8');
      const html = contractServer ? read.replaceAll(contractServer, url) : read;
      page = { url, html, policy: contentSecurityPolicy(html) };
    }
    res.set('Content-Security-Policy', page.policy).type('html').send(page.html);
  });
  router.get(scriptPath, (_req, res, next) => {
    if (!docsDir) return next();
    res.sendFile(join(docsDir, docsScript), { maxAge: '1h' });
  });
  return router;
}
