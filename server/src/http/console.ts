/**
 * GET /console: the web console, a single page built by `npm run build` into console/dist and
 * served from here (no CDN). The page and its pages' paths (/console/keys, …) answer its
 * index.html; /console/assets/ its scripts and styles, named by their content hash.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import express, { type Router } from 'express';
import { consoleDir } from '../built-files.ts';
import { ProblemError } from './problem.ts';
import { setRouteTemplate } from './request-log.ts';

export const consolePath = '/console';

/** Where `npm run build` writes the console. */
export const defaultConsoleDir = consoleDir;

/**
 * Scripts and styles from this service only, and none inline: an injected `<script>` or `style=""`
 * does not run. Trusted Types stop a string reaching an HTML sink (innerHTML) at all; the API is
 * this origin; nobody may frame the console (clickjacking a "Remove key").
 */
export const consoleContentSecurityPolicy = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join('; ');

const pageHeaders = {
  'Content-Security-Policy': consoleContentSecurityPolicy,
  // For browsers older than frame-ancestors.
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Cross-Origin-Opener-Policy': 'same-origin',
  // A new build names new assets; the page itself is asked for again each time.
  'Cache-Control': 'no-cache',
};

/**
 * A page of the console: `/console` and any path under it that names no file (no dot). The page
 * tells its own pages from the rest, and says "Page not found" for those in the console's words.
 */
const pagePattern = /^\/console(?:\/[^.]*)?$/;

export function consoleRouter(consoleDir: string = defaultConsoleDir): Router {
  const router = express.Router();
  let loaded: { mtimeMs: number; html: string } | undefined;
  // Counted and logged under two routes of their own (svc_http_requests_total), not `unmatched`:
  // the pages, and the hashed scripts and styles.
  router.use(consolePath, (req, res, next) => {
    setRouteTemplate(res, req.path.startsWith('/assets/') ? `${consolePath}/assets/*` : `${consolePath}/*`);
    next();
  });
  router.get(pagePattern, (_req, res) => {
    const page = join(consoleDir, 'index.html');
    if (!existsSync(page)) {
      throw new ProblemError(503, 'console_not_built', 'The web console is not built: run `npm run build`.');
    }
    // Read again only when a build replaced it.
    const { mtimeMs } = statSync(page);
    if (loaded?.mtimeMs !== mtimeMs) loaded = { mtimeMs, html: readFileSync(page, 'utf8') };
    res.set(pageHeaders).type('html').send(loaded.html);
  });
  router.use(
    `${consolePath}/assets`,
    express.static(join(consoleDir, 'assets'), {
      index: false,
      dotfiles: 'deny',
      immutable: true,
      maxAge: '365d',
      redirect: false,
      setHeaders: (res) => res.setHeader('X-Content-Type-Options', 'nosniff'),
    }),
  );
  return router;
}
