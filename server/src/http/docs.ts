/**
 * The contract for people and programs: GET /openapi.json (the bundled contract) and GET /docs,
 * the reference page built by `npm run build` (Redoc, served from here: no CDN).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import express, { type Router } from 'express';
import { ProblemError } from './problem.ts';

export const docsPage = 'index.html';
export const docsScript = 'redoc.standalone.js';

export function docsRouter(contract: unknown, docsDir: string | undefined): Router {
  const router = express.Router();
  router.get('/openapi.json', (_req, res) => {
    res.json(contract);
  });
  router.get('/docs', (_req, res) => {
    if (!docsDir || !existsSync(join(docsDir, docsPage))) {
      throw new ProblemError(
        503,
        'docs_not_built',
        'The reference page is not built: run `npm run build`, or read /openapi.json.',
      );
    }
    res.sendFile(join(docsDir, docsPage));
  });
  router.get(`/docs/${docsScript}`, (_req, res, next) => {
    if (!docsDir) return next();
    res.sendFile(join(docsDir, docsScript), { maxAge: '1h' });
  });
  return router;
}
