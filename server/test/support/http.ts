/** Small HTTP helpers for tests: JSON in, status and JSON out, from any loopback address. */
import { request } from 'node:http';
import { connect } from 'node:net';

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  // biome-ignore lint/suspicious/noExplicitAny: tests read replies field by field and assert on them
  body: any;
}

export interface CallOptions {
  body?: unknown;
  token?: string;
  headers?: Record<string, string>;
  /** A body sent as is (malformed JSON, oversized bodies). */
  raw?: string | Buffer;
  /** The client's address, e.g. 127.0.0.2, to act as another machine. */
  from?: string;
}

export function call(base: string, method: string, path: string, options: CallOptions = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let payload: string | Buffer | undefined = options.raw;
  if (options.body !== undefined) payload = JSON.stringify(options.body);
  if (payload !== undefined) {
    headers['content-type'] ??= 'application/json';
    headers['content-length'] = String(Buffer.byteLength(payload));
  }
  // `'content-type': ''` sends a body without one, as `curl -d` to a JSON route may.
  if (headers['content-type'] === '') delete headers['content-type'];
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, base), { method, headers, localAddress: options.from }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const type = res.headers['content-type'] ?? '';
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: type.includes('json') && text ? JSON.parse(text) : text,
        });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

export interface RawReply {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Sends `bytes` as they are over a fresh TCP connection and reads the answer until the server
 * closes it (so send `Connection: close` or a request it refuses): for requests that no HTTP
 * client library would send.
 */
export function rawExchange(base: string, bytes: string | Buffer): Promise<RawReply> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    // Written without ending our side: Node's server drops requests in flight when the client
    // half-closes, so the request asks for `Connection: close` and the server ends the exchange.
    const socket = connect({ host: hostname, port: Number(port) }, () => socket.write(bytes));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(parseRaw(Buffer.concat(chunks))));
  });
}

function parseRaw(bytes: Buffer): RawReply {
  const text = bytes.toString('utf8');
  const [head = '', ...rest] = text.split('\r\n\r\n');
  const [statusLine = '', ...headerLines] = head.split('\r\n');
  const headers = Object.fromEntries(
    headerLines.map((line) => {
      const colon = line.indexOf(':');
      return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
    }),
  );
  return { status: Number(statusLine.split(' ')[1] ?? 0), headers, body: rest.join('\r\n\r\n') };
}

/** A request whose body the test writes bit by bit, over a raw TCP connection. */
export interface StreamedRequest {
  /** The answer, once the server has closed the connection; status 0 if it closed without one. */
  reply: Promise<RawReply>;
  /** Whether any of the answer has arrived yet. */
  answered(): boolean;
  /** Body bytes written so far. */
  bodyBytesSent(): number;
  send(bytes: string | Buffer): void;
  /** Goes away without finishing (the client crashed, or gave up). */
  abandon(): void;
}

/**
 * Opens a connection and sends `head` (request line and headers, ending in an empty line); the
 * body follows with `send`. Errors after the server has closed (a reset, a write to a closed
 * socket) are what a client sending too much sees: the answer read so far is still the reply.
 */
export function startRequest(base: string, head: string): StreamedRequest {
  const { hostname, port } = new URL(base);
  const socket = connect({ host: hostname, port: Number(port) });
  socket.write(head);
  const chunks: Buffer[] = [];
  let sent = 0;
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  socket.on('error', () => {});
  const reply = new Promise<RawReply>((resolve) => {
    socket.on('close', () => resolve(parseRaw(Buffer.concat(chunks))));
  });
  return {
    reply,
    answered: () => chunks.length > 0,
    bodyBytesSent: () => sent,
    send(bytes) {
      if (socket.destroyed || !socket.writable) return;
      sent += Buffer.byteLength(bytes);
      socket.write(bytes);
    },
    abandon: () => socket.destroy(),
  };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Sends `body` one piece every `intervalMs` until the server answers (or all is sent), then waits
 * for the answer; gives up (status 0) after `giveUpMs` in all. The reply says how much of the body
 * went out before the answer came.
 */
export async function trickle(
  request: StreamedRequest,
  body: Iterable<string | Buffer>,
  options: { intervalMs: number; giveUpMs: number },
): Promise<RawReply & { bodyBytesSent: number }> {
  const giveUp = Date.now() + options.giveUpMs;
  for (const piece of body) {
    if (request.answered() || Date.now() > giveUp) break;
    request.send(piece);
    await pause(options.intervalMs);
  }
  const sent = request.bodyBytesSent();
  const left = Math.max(0, giveUp - Date.now());
  const reply = await Promise.race([request.reply, pause(left).then(() => undefined)]);
  if (!reply) {
    request.abandon();
    return { status: 0, headers: {}, body: '', bodyBytesSent: sent };
  }
  return { ...reply, bodyBytesSent: sent };
}

/** Waits until `check` holds, trying every 50 ms; fails naming `what` after `timeoutMs`. */
export async function eventually(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000) {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`gave up waiting: ${what}`);
    await pause(50);
  }
}

/** A package PUT to a presigned upload URL, as `svc publish` sends it: no Authorization header. */
export async function putPackage(target: string, body: Buffer, headers: Record<string, string> = {}) {
  const response = await fetch(target, {
    method: 'PUT',
    headers: { 'content-type': 'application/gzip', ...headers },
    // The same bytes, typed as the DOM's fetch takes them too (the browser tests compile with it).
    body: new Uint8Array(body.buffer as ArrayBuffer, body.byteOffset, body.byteLength),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

/** The same URL on another service (another replica, or a restart on another port). */
export function sameUrlOn(service: { url: string }, target: string): string {
  const { pathname, search } = new URL(target);
  return `${service.url}${pathname}${search}`;
}
