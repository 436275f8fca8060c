/**
 * GET /_svc/sdk.js: the browser build of `@svc/sdk/runtime` (`npm run build` makes it), served as
 * a car's host serves it to its apps (DESIGN §10), so that a page needs no bundler:
 * `import { connectHost } from '/_svc/sdk.js'`. Not an operation of the contract: a static file,
 * like /docs.
 */
import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import express, { type Router } from 'express';
import { sdkScriptFile } from '../built-files.ts';
import { ProblemError } from './problem.ts';

export const sdkScriptPath = '/_svc/sdk.js';

/** The paths this router answers with GET (and so HEAD, and OPTIONS through `crossOrigin`). */
export const sdkScriptPaths = [sdkScriptPath] as const;

/** The built runtime, where `npm run build` writes it. */
export const defaultSdkScript = sdkScriptFile;

/**
 * An hour: a new runtime reaches pages within that, and a page revalidates with its ETag
 * rather than downloading the script again.
 */
const maxAgeSeconds = 3600;

/** Whether an `If-None-Match` list names `etag` (weak comparison, as RFC 9110 asks for GET). */
function matches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (ifNoneMatch === undefined) return false;
  return ifNoneMatch
    .split(',')
    .map((tag) => tag.trim().replace(/^W\//, ''))
    .some((tag) => tag === '*' || tag === etag);
}

export function sdkScriptRouter(file: string = defaultSdkScript): Router {
  const router = express.Router();
  let loaded: { mtimeMs: number; size: number; body: Buffer; etag: string } | undefined;
  router.get(sdkScriptPath, (req, res) => {
    let stat: { mtimeMs: number; size: number };
    try {
      stat = statSync(file);
    } catch {
      throw new ProblemError(
        503,
        'sdk_not_built',
        'The mini-app runtime is not built: run `npm run build` (it writes client/dist/runtime.browser.js).',
      );
    }
    // Read again only when a build replaced it.
    if (loaded?.mtimeMs !== stat.mtimeMs || loaded.size !== stat.size) {
      const body = readFileSync(file);
      const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
      loaded = { mtimeMs: stat.mtimeMs, size: stat.size, body, etag };
    }
    res.set({
      'Content-Type': 'application/javascript; charset=utf-8',
      'Cache-Control': `public, max-age=${maxAgeSeconds}`,
      ETag: loaded.etag,
      'X-Content-Type-Options': 'nosniff',
      // A public script with no secret in it: any page may import it as a module, which
      // browsers fetch in CORS mode. No credentials are ever involved.
      'Access-Control-Allow-Origin': '*',
      'Cross-Origin-Resource-Policy': 'cross-origin',
    });
    if (matches(req.get('if-none-match'), loaded.etag)) {
      res.status(304).end();
      return;
    }
    res.send(loaded.body);
  });
  return router;
}
