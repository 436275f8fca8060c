/**
 * `express.json` with its limit applied as soon as it can be: body-parser refuses an oversized
 * body only after reading all of it (it drains the request before it calls `next`), so a client
 * announcing 20 MiB had its 413 once the 20 MiB had arrived. Here the announced length is
 * checked before anything is read, and a chunked body is counted as it comes; either way the
 * 413 goes out at once and the connection closes (see `problemMiddleware`).
 *
 * A body that parses but nests deeper than `maxJsonDepth` is refused here too, before anything
 * walks it: JSON.parse takes any depth, but what comes after it may recurse.
 */
import express, { type RequestHandler } from 'express';
import { maxJsonDepth, nestedDeeperThan } from '../json-nesting.ts';
import { ProblemError } from './problem.ts';

export function jsonBody(limitBytes: number): RequestHandler {
  const json = express.json({ limit: limitBytes });
  const tooLarge = () =>
    new ProblemError(413, 'payload_too_large', `The request body is larger than ${limitBytes} bytes.`);
  const tooDeep = () =>
    new ProblemError(
      400,
      'json_too_deep',
      `The request body nests objects and arrays deeper than ${maxJsonDepth} levels, more than any request of this API needs.`,
      { errors: [{ path: '/body', message: `must not nest deeper than ${maxJsonDepth} levels` }] },
    );
  return (req, res, next) => {
    const announced = req.headers['content-length'];
    if (announced !== undefined && Number(announced) > limitBytes) throw tooLarge();
    let refused = false;
    // body-parser's own answer, once it has drained the body, comes too late to matter.
    json(req, res, (error?: unknown) => {
      if (refused) return;
      if (!error && nestedDeeperThan(req.body, maxJsonDepth)) next(tooDeep());
      else next(error);
    });
    // Counted only while body-parser reads (it has attached its listener, so nothing is lost).
    if (announced === undefined && !req.complete && req.readableFlowing === true) {
      let received = 0;
      const count = (chunk: Buffer) => {
        received += chunk.length;
        if (received > limitBytes && !refused) {
          refused = true;
          req.off('data', count);
          next(tooLarge());
        }
      };
      req.on('data', count);
    }
  };
}
