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
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head = '', ...rest] = text.split('\r\n\r\n');
      const [statusLine = '', ...headerLines] = head.split('\r\n');
      const headers = Object.fromEntries(
        headerLines.map((line) => {
          const colon = line.indexOf(':');
          return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
        }),
      );
      resolve({ status: Number(statusLine.split(' ')[1] ?? 0), headers, body: rest.join('\r\n\r\n') });
    });
  });
}
