/**
 * The HTTP server around Express: requests Node's own parser refuses never reach Express, so they
 * are answered here, as problem+json like every other error; and request targets in absolute form
 * are read as the path they name.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { NextFunction, Request, Response } from 'express';
import { ProblemError } from './problem.ts';

/** Node's parser error codes that have a status of their own; every other parser error is a 400. */
const parserStatuses: Record<string, number> = {
  HPE_HEADER_OVERFLOW: 431,
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 413,
  ERR_HTTP_REQUEST_TIMEOUT: 408,
};

const parserProblems: Record<number, [code: string, title: string, detail: string]> = {
  400: ['malformed_request', 'Bad request', 'The request is not well-formed HTTP/1.1.'],
  408: ['request_timeout', 'Request timeout', 'The request took too long to arrive.'],
  413: ['payload_too_large', 'Payload too large', 'A chunk extension of the request is too large.'],
  417: [
    'expectation_failed',
    'Expectation failed',
    'The only expectation this service meets is `Expect: 100-continue`.',
  ],
  431: ['header_too_large', 'Request header fields too large', 'The request headers are too large.'],
};

function problemBody(status: number): string {
  const [code, title, detail] = parserProblems[status] ?? parserProblems[400] ?? ['', '', ''];
  return JSON.stringify({ type: `/problems/${code}`, title, status, detail, code });
}

/** Answers what Node's parser refuses (and expectations it cannot meet) with a problem, then closes. */
export function answerParserErrors(server: Server): void {
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    const response = (socket as Duplex & { _httpMessage?: ServerResponse })._httpMessage;
    // A client that went away, or a response already under way: there is nothing left to say.
    if (error.code === 'ECONNRESET' || !socket.writable || response?.headersSent) {
      socket.destroy();
      return;
    }
    const status = parserStatuses[error.code ?? ''] ?? 400;
    const body = problemBody(status);
    socket.end(
      `HTTP/1.1 ${status} ${parserProblems[status]?.[1]}\r\n` +
        'Content-Type: application/problem+json\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        'Connection: close\r\n\r\n' +
        body,
    );
  });
  server.on('checkExpectation', (_req: IncomingMessage, res: ServerResponse) => {
    const body = problemBody(417);
    res.writeHead(417, {
      'Content-Type': 'application/problem+json',
      'Content-Length': Buffer.byteLength(body),
      Connection: 'close',
    });
    res.end(body);
  });
}

/**
 * `GET http://host/api/v1/dev/me HTTP/1.1` names the same resource as `GET /api/v1/dev/me`, and
 * servers must accept both forms (RFC 9112 §3.2.2); Express routes only the second.
 */
export function originFormTarget(req: Request, _res: Response, next: NextFunction): void {
  if (/^[a-z][a-z0-9+.-]*:/i.test(req.url)) {
    let target: URL;
    try {
      target = new URL(req.url);
    } catch {
      throw new ProblemError(400, 'malformed_request', 'The request target is not a valid URL.');
    }
    if (target.protocol !== 'http:' && target.protocol !== 'https:') {
      throw new ProblemError(400, 'malformed_request', 'The request target must be a path or an http URL.');
    }
    req.url = `${target.pathname}${target.search}`;
    // Express took its copy before any middleware ran; the contract validator reads that copy.
    req.originalUrl = req.url;
  }
  next();
}
