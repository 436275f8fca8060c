/**
 * Bodies too large or too slow: the service answers as soon as it knows, and never lets a client
 * hold a connection by sending slowly. Raw sockets, because a client library sends bodies whole.
 */
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type RawReply, startRequest, trickle } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';

const mebibyte = 1024 * 1024;

/** `total` bytes of a JSON string body in pieces of `size`, `{"public_key":"xxx…"}`, cut where it falls. */
function* jsonPieces(total: number, size: number): Generator<Buffer> {
  const piece = Buffer.alloc(size, 'x');
  yield Buffer.from('{"public_key":"');
  for (let left = total - 15; left > 0; left -= size) yield left >= size ? piece : piece.subarray(0, left);
}

/** The same pieces as chunks of a chunked body, with its last chunk at the end. */
function* chunked(pieces: Iterable<Buffer>): Generator<Buffer> {
  for (const piece of pieces) {
    yield Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]);
  }
  yield Buffer.from('0\r\n\r\n');
}

function assertProblem(reply: RawReply, status: number, code: string) {
  assert.equal(reply.status, status, reply.status === 0 ? 'no answer came' : reply.body);
  assert.match(reply.headers['content-type'] ?? '', /^application\/problem\+json/);
  const problem = JSON.parse(reply.body);
  assert.equal(problem.status, status);
  assert.equal(problem.code, code);
}

describe('request bodies too large or too slow', () => {
  let service: TestService;
  let host: string;

  beforeAll(async () => {
    service = await startTestService({ SVC_REQUEST_TIMEOUT: '1s' });
    host = new URL(service.url).host;
  });
  afterAll(() => service.stop());

  const post = (headers: string) =>
    startRequest(
      service.url,
      `POST /api/v1/auth/challenges HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\n${headers}\r\n`,
    );

  test('when a JSON request announces 20 MiB then 413 comes at once and the connection closes, most of the body never sent', async () => {
    const total = 20 * mebibyte;
    const request = post(`Content-Length: ${total}\r\n`);
    // 64 KiB every 50 ms: the whole body would take 16 s; the answer must come long before.
    const reply = await trickle(request, jsonPieces(total, 64 * 1024), { intervalMs: 50, giveUpMs: 40_000 });
    assertProblem(reply, 413, 'payload_too_large');
    assert.equal(reply.headers.connection, 'close');
    assert.ok(reply.bodyBytesSent < total / 4, `${reply.bodyBytesSent} of ${total} bytes were sent first`);
  });

  test('when a chunked JSON body runs past the limit then 413 comes as it passes, not after the whole body', async () => {
    const total = 20 * mebibyte;
    const limit = service.config.jsonLimitBytes;
    const request = post('Transfer-Encoding: chunked\r\n');
    const reply = await trickle(request, chunked(jsonPieces(total, 64 * 1024)), {
      intervalMs: 50,
      giveUpMs: 40_000,
    });
    assertProblem(reply, 413, 'payload_too_large');
    assert.equal(reply.headers.connection, 'close');
    assert.ok(reply.bodyBytesSent > limit, 'the limit was passed');
    assert.ok(reply.bodyBytesSent < total / 4, `${reply.bodyBytesSent} of ${total} bytes were sent first`);
  });

  test('when a JSON body trickles in a byte at a time then it is cut with 408 after SVC_REQUEST_TIMEOUT', async () => {
    const body = JSON.stringify({ public_key: 'x'.repeat(200) });
    const request = post(`Content-Length: ${body.length}\r\n`);
    // 10 bytes a second: the whole body would take 20 seconds.
    const reply = await trickle(request, body, { intervalMs: 100, giveUpMs: 15_000 });
    assertProblem(reply, 408, 'request_timeout');
    assert.equal(reply.headers.connection, 'close');
    assert.ok(reply.bodyBytesSent < body.length, 'the body was cut before it was whole');
  });

  test('when a JSON body arrives in time then the short timeout changes nothing', async () => {
    const body = JSON.stringify({ public_key: 'not a key' });
    const request = post(`Content-Length: ${body.length}\r\nConnection: close\r\n`);
    const reply = await trickle(request, [body.slice(0, 5), body.slice(5)], {
      intervalMs: 100,
      giveUpMs: 5_000,
    });
    assert.equal(reply.status, 422, reply.body);
  });
});
