/**
 * How long a request may take to arrive. Node's `requestTimeout` is one number for the whole
 * server, and a presigned upload may take as long as its URL lives; raised for every route, it let
 * a JSON body trickled at a byte a second hold its connection for 15 minutes. Here each request
 * has its own deadline (short, unless its route allows more), and every body, uploads included,
 * must keep up a minimum rate over each window; a request that fails either is answered 408 and
 * its connection closed.
 */
import type { IncomingMessage } from 'node:http';
import type { RequestHandler } from 'express';
import { answerAndClose, bodyStillArriving } from './errors.ts';
import { ProblemError } from './problem.ts';

export interface PacingOptions {
  /** The deadline of a request whose route allows no more, from its headers; also the rate window. */
  timeoutMs: number;
  /** The slowest a body may arrive, in bytes per second over each window. */
  minBytesPerSecond: number;
}

interface Paced {
  started: number;
  setDeadline(ms: number): void;
}

export function requestPacing(options: PacingOptions) {
  const paced = new WeakMap<IncomingMessage, Paced>();
  const minBytesPerWindow = (options.minBytesPerSecond * options.timeoutMs) / 1000;

  const middleware: RequestHandler = (req, res, next) => {
    // Without a body, everything there is to receive has arrived with the headers.
    if (!bodyStillArriving(req)) {
      next();
      return;
    }
    const socket = req.socket;
    const cut = (detail: string) => {
      stop();
      answerAndClose(req, res, new ProblemError(408, 'request_timeout', detail));
    };
    let deadline: NodeJS.Timeout | undefined;
    const setDeadline = (ms: number) => {
      clearTimeout(deadline);
      deadline = setTimeout(
        () => cut('The request took too long to arrive.'),
        Math.max(0, state.started + ms - Date.now()),
      ).unref();
    };
    const state: Paced = { started: Date.now(), setDeadline };

    // A window counts only when the service read the body all through it: while a handler has not
    // started reading, or holds the body back (a slow disk), slowness is not the client's.
    let readAtWindowStart = socket.bytesRead;
    let readingAllWindow = req.readableFlowing === true;
    const paused = () => {
      readingAllWindow = false;
    };
    const window = setInterval(() => {
      if (req.complete) return stop();
      const read = socket.bytesRead - readAtWindowStart;
      readAtWindowStart = socket.bytesRead;
      if (readingAllWindow && req.readableFlowing === true && read < minBytesPerWindow) {
        cut('The request body arrived too slowly.');
        return;
      }
      readingAllWindow = req.readableFlowing === true;
    }, options.timeoutMs).unref();

    function stop() {
      clearTimeout(deadline);
      clearInterval(window);
      req.off('pause', paused);
      paced.delete(req);
    }
    req.on('pause', paused);
    req.once('end', stop);
    req.once('close', stop);
    res.once('close', () => {
      if (req.complete) stop();
    });
    paced.set(req, state);
    setDeadline(options.timeoutMs);
    next();
  };

  /** For a route whose request may take longer (the presigned upload PUT): `ms` from its start. */
  const allowing =
    (ms: number): RequestHandler =>
    (req, _res, next) => {
      paced.get(req)?.setDeadline(ms);
      next();
    };

  return { middleware, allowing };
}
