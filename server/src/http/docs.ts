/**
 * The contract for people and programs: GET /openapi.json (the bundled contract) and GET /docs,
 * the reference page built by `npm run build` (Redoc, served from here: no CDN).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import express, { type Router } from 'express';
import { ProblemError } from './problem.ts';

export const docsPage = 'index.html';
export const docsScript = 'redoc.standalone.js';

/**
 * `baseUrl`: where this service runs. The contract names the default local address as its
 * server; the docs page and /openapi.json name the real one, so "try it" and generated clients
 * reach this service whatever its PORT or SVC_PUBLIC_URL.
 */
export function docsRouter(
  contract: { servers?: { url: string; description?: string }[] },
  docsDir: string | undefined,
  baseUrl: () => string,
): Router {
  const router = express.Router();
  const contractServer = contract.servers?.[0]?.url;
  const withServer = (url: string) =>
    url === contractServer
      ? contract
      : { ...contract, servers: [{ url, description: 'This service.' }, ...(contract.servers ?? [])] };
  let page: { html: string; url: string } | undefined;
  router.get('/openapi.json', (_req, res) => {
    res.json(withServer(baseUrl()));
  });
  router.get('/docs', (_req, res) => {
    if (!docsDir || !existsSync(join(docsDir, docsPage))) {
      throw new ProblemError(
        503,
        'docs_not_built',
        'The reference page is not built: run `npm run build`, or read /openapi.json.',
      );
    }
    const url = baseUrl();
    if (page?.url !== url) {
      const html = readFileSync(join(docsDir, docsPage), 'utf8');
      page = { url, html: contractServer ? html.replaceAll(contractServer, url) : html };
    }
    res.type('html').send(page.html);
  });
  router.get(`/docs/${docsScript}`, (_req, res, next) => {
    if (!docsDir) return next();
    res.sendFile(join(docsDir, docsScript), { maxAge: '1h' });
  });
  return router;
}
