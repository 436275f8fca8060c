/**
 * One delivery attempt, against real receivers on this machine: node:http on 127.0.0.1 and ::1,
 * node:https with a certificate `openssl` makes now, and raw TCP servers that answer what no HTTP
 * server would. Loopback is where they live, so it is also what the SSRF guard must refuse unless
 * private addresses are allowed; no test sends a packet anywhere else (the cloud metadata address is
 * checked without connecting: the check refuses before any socket is opened).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { type AddressInfo, createServer as createTcpServer, type Server as TcpServer } from 'node:net';
import { afterAll, beforeAll, describe, test } from 'vitest';
import {
  type AttemptResult,
  checkWebhookUrl,
  createWebhookSender,
  isBlockedAddress,
  type WebhookSenderOptions,
} from '../src/webhooks/webhook-sender.ts';
import { webhookHeaders } from '../src/webhooks/webhook-signature.ts';
import { makeCertificates, type TestCertificates } from './support/certificates.ts';

interface Received {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** What the receivers do, by path; every request is kept in `received`. */
interface Receiver {
  port: number;
  received: Received[];
  /** Bytes /endless wrote before the sender closed the connection. */
  endless: { written: number; closed: Promise<void> };
  close(): Promise<void>;
}

const oneMiB = 1024 * 1024;
/** /endless stops by itself after this much: a bound for the test, far above what the sender reads. */
const endlessCap = 256 * oneMiB;

function routes(received: Received[], endless: Receiver['endless'], closed: () => void) {
  return (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      const path = new URL(req.url ?? '/', 'http://receiver').pathname;
      if (path === '/ok') {
        res.writeHead(200, { 'content-type': 'text/plain' }).end('thanks');
      } else if (path === '/accepted') {
        res.writeHead(204).end();
      } else if (path === '/fail') {
        res.writeHead(500, { 'content-type': 'text/plain' }).end(`database down. ${'x'.repeat(5000)}`);
      } else if (path === '/gone') {
        res.writeHead(410).end('no longer');
      } else if (path === '/redirect') {
        res.writeHead(302, { location: '/elsewhere?from=redirect' }).end();
      } else if (path === '/hang') {
        // Never answers.
      } else if (path === '/hang-body') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('partial');
      } else if (path === '/endless') {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        const chunk = Buffer.alloc(64 * 1024, 'a');
        res.on('close', closed);
        const pump = () => {
          while (!res.destroyed && endless.written < endlessCap) {
            endless.written += chunk.length;
            if (!res.write(chunk)) return void res.once('drain', pump);
          }
          res.end();
        };
        pump();
      } else {
        res.writeHead(404).end('no such path');
      }
    });
  };
}

async function startReceiver(
  make: (handler: ReturnType<typeof routes>) => Server,
  host: string,
): Promise<Receiver> {
  const received: Received[] = [];
  let closed!: () => void;
  const endless = { written: 0, closed: new Promise<void>((resolve) => (closed = resolve)) };
  const server = make(routes(received, endless, () => closed()));
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    port: (server.address() as AddressInfo).port,
    received,
    endless,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A TCP server that answers every connection with `bytes` and nothing else. */
async function startRawServer(bytes: string): Promise<{ port: number; server: TcpServer }> {
  const server = createTcpServer((socket) => {
    socket.on('error', () => {});
    socket.once('data', () => socket.end(bytes));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, server };
}

const body = JSON.stringify({
  type: 'car.status_changed',
  timestamp: '2026-11-21T10:06:00.000Z',
  data: { device_id: 'brand_a:1HGCM82633A004352', online: true },
});
const headers = webhookHeaders({
  secrets: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'],
  id: 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W',
  timestamp: 1795255560,
  body,
});

let certificates: TestCertificates;
let ca: string;
let plain: Receiver;
let plainV6: Receiver;
let secure: Receiver;

beforeAll(async () => {
  certificates = makeCertificates();
  ca = readFileSync(certificates.ca, 'utf8');
  const tls = { cert: readFileSync(certificates.serverCert), key: readFileSync(certificates.serverKey) };
  plain = await startReceiver((handler) => createHttpServer(handler), '127.0.0.1');
  plainV6 = await startReceiver((handler) => createHttpServer(handler), '::1');
  secure = await startReceiver((handler) => createHttpsServer(tls, handler), '127.0.0.1');
});

afterAll(async () => {
  await Promise.all([plain?.close(), plainV6?.close(), secure?.close()]);
  certificates?.remove();
});

/** A sender with roomy bounds, trusting the test CA; `options` change what a test is about. */
function sender(options: Partial<WebhookSenderOptions> = {}) {
  return createWebhookSender({
    timeoutMs: 10_000,
    maxResponseBytes: 64 * 1024,
    allowPrivate: true,
    ca,
    ...options,
  });
}

const send = (url: string, options: Partial<WebhookSenderOptions> = {}) =>
  sender(options).send({ url, headers, body });

function assertRefused(result: AttemptResult, error: AttemptResult['error'], detail?: RegExp) {
  assert.equal(result.outcome, 'failed', JSON.stringify(result));
  assert.equal(result.error, error, result.detail);
  assert.equal(result.status, undefined);
  if (detail) assert.match(result.detail ?? '', detail);
}

describe('an attempt that reaches the receiver', () => {
  test('when the receiver answers 200 then it is delivered, and the body and headers arrived as sent', async () => {
    const before = plain.received.length;
    const result = await send(`http://127.0.0.1:${plain.port}/ok?source=svc`);
    assert.equal(result.outcome, 'delivered', result.detail);
    assert.equal(result.status, 200);
    assert.equal(result.response, 'thanks');
    assert.equal(result.error, undefined);
    assert.ok(result.durationMs >= 0);

    const [request, ...more] = plain.received.slice(before);
    assert.deepEqual(more, []);
    assert.equal(request?.method, 'POST');
    assert.equal(request?.url, '/ok?source=svc');
    assert.equal(request?.body, body);
    for (const [name, value] of Object.entries(headers)) assert.equal(request?.headers[name], value, name);
    assert.equal(request?.headers['content-length'], String(Buffer.byteLength(body)));
  });

  test('when the receiver answers 204 over https with a certificate of a trusted CA then it is delivered', async () => {
    const result = await send(`https://127.0.0.1:${secure.port}/accepted`);
    assert.equal(result.outcome, 'delivered', result.detail);
    assert.equal(result.status, 204);
    assert.equal(result.response, '');
    assert.equal(secure.received.at(-1)?.body, body);
  });

  test('when the receiver answers 500 then it failed, with the status and the first KiB of the answer', async () => {
    const result = await send(`http://127.0.0.1:${plain.port}/fail`);
    assert.equal(result.outcome, 'failed');
    assert.equal(result.status, 500);
    assert.equal(result.response, `database down. ${'x'.repeat(1024 - 'database down. '.length)}`);
    assert.match(result.detail ?? '', /500 Internal Server Error/);
  });

  test('when the receiver answers 410 then it failed with that status, for the worker to act on', async () => {
    const result = await send(`http://127.0.0.1:${plain.port}/gone`);
    assert.equal(result.outcome, 'failed');
    assert.equal(result.status, 410);
    assert.equal(result.response, 'no longer');
  });

  test('when the receiver redirects then it failed, saying where to, and the redirect was not followed', async () => {
    const before = plain.received.length;
    const result = await send(`http://127.0.0.1:${plain.port}/redirect`);
    assert.equal(result.outcome, 'failed');
    assert.equal(result.status, 302);
    assert.equal(result.error, 'redirect');
    assert.match(
      result.detail ?? '',
      new RegExp(`http://127\\.0\\.0\\.1:${plain.port}/elsewhere\\?from=redirect`),
    );
    assert.deepEqual(
      plain.received.slice(before).map((request) => request.url),
      ['/redirect'],
    );
  });
});

describe('an attempt is bounded', () => {
  test('when the receiver never answers then it failed with timeout, at the time bound', async () => {
    const timeoutMs = 500;
    const result = await send(`http://127.0.0.1:${plain.port}/hang`, { timeoutMs });
    assertRefused(result, 'timeout', /no answer within 500 ms/);
    assert.ok(result.durationMs >= timeoutMs - 1, `ended after ${result.durationMs} ms`);
    // Well before the 10 s the sender would wait without its own bound (vitest's is 120 s).
    assert.ok(result.durationMs < timeoutMs + 5000, `ended after ${result.durationMs} ms`);
  });

  test('when the receiver answers 200 and its body never ends then the status counts, at the time bound', async () => {
    const result = await send(`http://127.0.0.1:${plain.port}/hang-body`, { timeoutMs: 500 });
    assert.equal(result.outcome, 'delivered');
    assert.equal(result.status, 200);
    assert.equal(result.response, 'partial');
    assert.match(result.detail ?? '', /did not end within 500 ms/);
  });

  test('when the answer is endless then the sender reads up to its bound, closes the connection and keeps 1 KiB', async () => {
    const result = await send(`http://127.0.0.1:${plain.port}/endless`, { timeoutMs: 60_000 });
    assert.equal(result.outcome, 'delivered');
    assert.equal(result.status, 200);
    assert.equal(result.response, 'a'.repeat(1024));
    assert.match(result.detail ?? '', /longer than 65536 bytes/);
    // The connection was closed by the sender, long before the receiver had written everything.
    await plain.endless.closed;
    assert.ok(plain.endless.written < endlessCap / 4, `the receiver wrote ${plain.endless.written} bytes`);
  });

  test("when the answer's headers are huge then it failed as answer_too_large", async () => {
    const { port, server } = await startRawServer(
      `HTTP/1.1 200 OK\r\nx-padding: ${'a'.repeat(20_000)}\r\n\r\n`,
    );
    try {
      assertRefused(await send(`http://127.0.0.1:${port}/`), 'answer_too_large', /16 KiB/);
    } finally {
      server.close();
    }
  });

  test('when the answer is not HTTP then it failed as invalid_answer', async () => {
    const { port, server } = await startRawServer('SSH-2.0-OpenSSH_9.2\r\n\r\n');
    try {
      assertRefused(await send(`http://127.0.0.1:${port}/`), 'invalid_answer', /not HTTP/);
    } finally {
      server.close();
    }
  });
});

describe('an attempt that fails before an answer', () => {
  test('when nothing listens on the port then it failed as connection_failed, naming the place', async () => {
    const { port, server } = await startRawServer('');
    await new Promise((resolve) => server.close(resolve));
    assertRefused(
      await send(`http://127.0.0.1:${port}/`),
      'connection_failed',
      new RegExp(`127\\.0\\.0\\.1:${port}, ECONNREFUSED`),
    );
  });

  test('when the certificate is not of a trusted CA then it failed as tls_failed', async () => {
    const result = await send(`https://127.0.0.1:${secure.port}/ok`, {
      ca: readFileSync(certificates.otherCa, 'utf8'),
    });
    assertRefused(result, 'tls_failed', /TLS handshake/);
  });

  test('when the certificate is for another name then it failed as tls_failed', async () => {
    const lookup = async () => [{ address: '127.0.0.1', family: 4 }];
    const result = await send(`https://hooks.example.com:${secure.port}/ok`, { lookup });
    assertRefused(result, 'tls_failed', /ERR_TLS_CERT_ALTNAME_INVALID/);
  });

  test('when an https URL reaches a server without TLS then it failed as tls_failed', async () => {
    assertRefused(await send(`https://127.0.0.1:${plain.port}/ok`), 'tls_failed');
  });

  test('when the name does not resolve then it failed as name_not_resolved', async () => {
    const lookup = async () => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND hooks.example.invalid'), { code: 'ENOTFOUND' });
    };
    assertRefused(
      await send('https://hooks.example.invalid/ok', { lookup }),
      'name_not_resolved',
      /hooks\.example\.invalid/,
    );
  });
});

describe('the SSRF guard, at each connection', () => {
  test('when localhost (a name that resolves to 127.0.0.1) is the host then it is refused, unless private addresses are allowed', async () => {
    const before = secure.received.length;
    const refused = await send(`https://localhost:${secure.port}/ok`, { allowPrivate: false });
    assertRefused(refused, 'address_refused', /localhost resolves to 127\.0\.0\.1, a loopback address/);
    assert.equal(secure.received.length, before, 'the receiver got the request');

    const delivered = await send(`https://localhost:${secure.port}/ok`, { allowPrivate: true });
    assert.equal(delivered.outcome, 'delivered', delivered.detail);
    assert.equal(secure.received.length, before + 1);
    assert.equal((await send(`http://localhost:${plain.port}/ok`)).outcome, 'delivered');
  });

  test('when a name resolves, at the time of sending, to a loopback address then it is refused (a DNS answer that changed after registration)', async () => {
    // At registration the name says nothing of where it points.
    const url = `https://hooks.example.com:${secure.port}/ok`;
    assert.equal(checkWebhookUrl(url, { allowPrivate: false }).ok, true);

    const asked: string[] = [];
    for (const address of [
      { address: '127.0.0.1', family: 4 },
      { address: '::1', family: 6 },
      { address: '::ffff:127.0.0.1', family: 6 },
    ]) {
      const lookup = async (hostname: string) => {
        asked.push(hostname);
        return [address];
      };
      const result = await send(url, { allowPrivate: false, lookup });
      assertRefused(
        result,
        'address_refused',
        new RegExp(`hooks\\.example\\.com resolves to ${address.address.replaceAll('.', '\\.')}`),
      );
    }
    assert.deepEqual(asked, ['hooks.example.com', 'hooks.example.com', 'hooks.example.com']);
  });

  test('when the host is a loopback address, written as an address, then it is refused before connecting', async () => {
    const urls = [
      `https://127.0.0.1:${secure.port}/ok`,
      `https://[::1]:${plainV6.port}/ok`,
      `https://[::ffff:127.0.0.1]:${secure.port}/ok`,
      // The URL parser's other spellings of 127.0.0.1.
      `https://2130706433:${secure.port}/ok`,
      `https://0x7f.1:${secure.port}/ok`,
    ];
    const before = secure.received.length + plainV6.received.length;
    for (const url of urls) {
      assertRefused(await send(url, { allowPrivate: false }), 'address_refused', /loopback/);
    }
    assert.equal(secure.received.length + plainV6.received.length, before);
  });

  test('when private addresses are allowed then http:// to 127.0.0.1, [::1] and [::ffff:127.0.0.1] is delivered', async () => {
    for (const url of [
      `http://127.0.0.1:${plain.port}/ok`,
      `http://[::1]:${plainV6.port}/ok`,
      `http://[::ffff:127.0.0.1]:${plain.port}/ok`,
    ]) {
      const result = await send(url, { allowPrivate: true });
      assert.equal(result.outcome, 'delivered', `${url}: ${result.detail}`);
    }
  });

  test('when private addresses are not allowed then http:// URLs are refused before anything is sent, these included', async () => {
    const before = plain.received.length + plainV6.received.length;
    for (const url of [
      `http://127.0.0.1:${plain.port}/ok`,
      `http://[::1]:${plainV6.port}/ok`,
      'http://169.254.169.254/latest/meta-data/',
      `http://[::ffff:127.0.0.1]:${plain.port}/ok`,
    ]) {
      assertRefused(await send(url, { allowPrivate: false }), 'unsupported_scheme', /https:\/\//);
    }
    assert.equal(plain.received.length + plainV6.received.length, before);
  });
});

describe('checkWebhookUrl, at registration', () => {
  const check = (url: string, allowPrivate = false) => checkWebhookUrl(url, { allowPrivate });
  const refusedAs = (url: string, code: string, allowPrivate = false) => {
    const result = check(url, allowPrivate);
    assert.equal(result.ok, false, `${url} was accepted`);
    if (!result.ok) {
      assert.equal(result.code, code, `${url}: ${result.detail}`);
      return result.detail;
    }
    return '';
  };

  test('when the URL is https:// to a name or a public address then it is accepted, normalised', () => {
    const result = check('https://Hooks.Example.com/svc/events?source=svc');
    assert.ok(result.ok);
    if (result.ok) assert.equal(result.url.href, 'https://hooks.example.com/svc/events?source=svc');
    assert.equal(check('https://93.184.215.14:8443/hooks').ok, true);
    assert.equal(check('https://[2606:4700:4700::1111]/hooks').ok, true);
  });

  test('when the URL is http:// then it is refused, saying why and when http:// is allowed', () => {
    const detail = refusedAs('http://hooks.example.com/svc', 'unsupported_scheme');
    assert.match(detail, /must start with https:\/\//);
    assert.match(detail, /private networks and tests often have no TLS/);
    assert.equal(check('http://hooks.example.com/svc', true).ok, true);
  });

  test('when the scheme is neither then it is refused', () => {
    for (const url of [
      'ftp://hooks.example.com/',
      'file:///etc/passwd',
      'javascript:alert(1)',
      'gopher://hooks.example.com/',
    ]) {
      refusedAs(url, 'unsupported_scheme', true);
    }
  });

  test('when the URL holds a user and password, or a fragment, then it is refused', () => {
    assert.match(
      refusedAs('https://user:secret@hooks.example.com/', 'credentials_in_url'),
      /user name or password/,
    );
    refusedAs('https://token@hooks.example.com/', 'credentials_in_url');
    assert.match(refusedAs('https://hooks.example.com/svc#events', 'fragment_in_url'), /never sent/);
    refusedAs('https://hooks.example.com/svc#', 'fragment_in_url');
  });

  test('when the URL is not one, or longer than 2048 characters, then it is refused', () => {
    assert.match(refusedAs('hooks.example.com/svc', 'invalid_url'), /such as https:\/\//);
    refusedAs('', 'invalid_url');
    const long = `https://hooks.example.com/${'a'.repeat(2048)}`;
    assert.match(refusedAs(long, 'url_too_long'), /2074 characters long; at most 2048/);
    assert.equal(check(`https://hooks.example.com/${'a'.repeat(2048 - 26)}`).ok, true);
  });

  test('when the host is an address that is not public then it is refused, naming what it is', () => {
    const cases: Array<[string, RegExp]> = [
      ['https://127.0.0.1/', /loopback/],
      ['https://[::1]/', /loopback/],
      ['https://169.254.169.254/latest/meta-data/', /link-local.*metadata/],
      ['https://[::ffff:169.254.169.254]/', /link-local.*written as IPv6/],
      ['https://10.0.0.8/', /private/],
      ['https://172.16.4.1/', /private/],
      ['https://192.168.1.20/', /private/],
      ['https://100.64.0.1/', /carrier-grade NAT/],
      ['https://0.0.0.0/', /unspecified/],
      ['https://[fd00::1]/', /unique-local/],
      ['https://[fe80::1]/', /link-local/],
      ['https://224.0.0.1/', /multicast/],
      ['https://255.255.255.255/', /broadcast/],
      ['https://192.0.2.10/', /reserved or documentation/],
      ['https://[64:ff9b::7f00:1]/', /loopback.*written as IPv6/],
    ];
    for (const [url, kind] of cases) assert.match(refusedAs(url, 'address_refused'), kind, url);
    for (const [url] of cases) assert.equal(check(url, true).ok, true, url);
  });

  test('when the host is localhost or under .localhost then it is refused at once, pointing to a tunnel', () => {
    for (const url of ['https://localhost/', 'https://localhost./', 'https://hooks.localhost:8443/']) {
      assert.match(refusedAs(url, 'address_refused'), /this machine.*tunnel/, url);
      assert.equal(check(url, true).ok, true);
    }
  });
});

describe('isBlockedAddress', () => {
  test('when the address is loopback, private, link-local, CGNAT, unspecified, multicast, broadcast, reserved or documentation then it is blocked', () => {
    const blocked = [
      '127.0.0.1',
      '127.255.255.254',
      '10.0.0.1',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.0.1',
      '169.254.169.254',
      '100.64.0.1',
      '100.127.255.254',
      '0.0.0.0',
      '0.1.2.3',
      '255.255.255.255',
      '224.0.0.251',
      '239.255.255.250',
      '240.0.0.1',
      '192.0.0.8',
      '192.0.2.1',
      '198.51.100.7',
      '203.0.113.9',
      '198.18.0.1',
      '::',
      '::1',
      'fe80::1',
      'fe80::1%eth0',
      'fc00::1',
      'fd12:3456:789a::1',
      'ff02::1',
      'fec0::1',
      '2001:db8::1',
      '100::1',
    ];
    for (const ip of blocked) assert.equal(isBlockedAddress(ip), true, ip);
  });

  test('when an IPv6 address carries a blocked IPv4 one (mapped, translated, NAT64, compatible, 6to4) then it is blocked', () => {
    const blocked = [
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '::ffff:10.0.0.1',
      '::ffff:169.254.169.254',
      '::ffff:0:127.0.0.1',
      '64:ff9b::127.0.0.1',
      '64:ff9b::a9fe:a9fe',
      '64:ff9b:1::8.8.8.8',
      '::127.0.0.1',
      '2002:7f00:1::1',
    ];
    for (const ip of blocked) assert.equal(isBlockedAddress(ip), true, ip);
  });

  test('when the address is public unicast, in either family or mapped, then it is not blocked', () => {
    const open = [
      '8.8.8.8',
      '1.1.1.1',
      '93.184.215.14',
      '172.32.0.1',
      '100.128.0.1',
      '169.255.0.1',
      '2606:4700:4700::1111',
      '2001:4860:4860::8888',
      '::ffff:8.8.8.8',
      '64:ff9b::8.8.8.8',
    ];
    for (const ip of open) assert.equal(isBlockedAddress(ip), false, ip);
  });

  test('when the text is not an address then it is blocked, failing closed', () => {
    for (const text of ['', 'localhost', 'hooks.example.com', '999.1.1.1', '1.2.3.4.5', ':::1']) {
      assert.equal(isBlockedAddress(text), true, text);
    }
  });
});
