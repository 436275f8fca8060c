/**
 * The presigned upload URL as a credential (only the form the service wrote is taken), uploads that
 * arrive slowly, and uploads held by a receiver on one replica while another starts.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpDeveloper } from './support/accounts.ts';
import {
  call,
  eventually,
  putPackage,
  type StreamedRequest,
  sameUrlOn,
  startRequest,
  trickle,
} from './support/http.ts';
import { makePackage, manifestFor, type TestPackage } from './support/packages.ts';
import { startTestService, type TestService } from './support/service.ts';

interface Target {
  upload_id: string;
  upload_url: string;
}

async function uploadUrl(service: TestService, developer: Developer, pkg: TestPackage): Promise<Target> {
  const reply = await call(service.url, 'POST', '/api/v1/mini-apps/upload-url', {
    token: developer.token,
    body: { app_id: pkg.appId, version: pkg.version, size: pkg.size, sha256: pkg.sha256 },
  });
  assert.equal(reply.status, 201, JSON.stringify(reply.body));
  return reply.body;
}

/** A PUT of the package whose body the test sends itself, piece by piece. */
function startPut(target: string, pkg: TestPackage): StreamedRequest {
  const { host, pathname, search, origin } = new URL(target);
  return startRequest(
    origin,
    `PUT ${pathname}${search} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/gzip\r\n` +
      `Content-Length: ${pkg.size}\r\nConnection: close\r\n\r\n`,
  );
}

function* pieces(bytes: Buffer, size: number): Generator<Buffer> {
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size);
}

/** A package of about 2 KB that does not compress. */
const biggerPackage = (id: string) =>
  makePackage(manifestFor(id, '1.0.0'), {
    'index.html': '<h1>hello</h1>',
    'noise.txt': randomBytes(1500).toString('base64'),
  });

const partialFiles = (dataDir: string) =>
  readdirSync(join(dataDir, 'blobs', 'incoming')).filter((name) => name.endsWith('.part'));

// One service for the URL checks and the slow uploads: a URL's form is checked before any body is
// read, so its short request deadline changes nothing for the first.
let service: TestService;
let developer: Developer;

beforeAll(async () => {
  service = await startTestService({ SVC_REQUEST_TIMEOUT: '1s', SVC_MIN_BODY_RATE: '100' });
  developer = await signUpDeveloper(service.url);
});
afterAll(() => service?.stop());

describe('presigned upload URLs are taken only as the service wrote them', () => {
  /** The last character of a 32-byte base64url value carries 4 bits and 2 unused ones. */
  const flipUnusedBit = (signature: string) => {
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const last = alphabet.indexOf(signature.at(-1) ?? 'A');
    return `${signature.slice(0, -1)}${alphabet[last ^ 1]}`;
  };

  const rewrites: [string, (url: URL, expires: string, signature: string) => string][] = [
    ['expires has a leading zero', (u, e, s) => `${u.origin}${u.pathname}?expires=0${e}&signature=${s}`],
    ['expires has a plus sign', (u, e, s) => `${u.origin}${u.pathname}?expires=%2B${e}&signature=${s}`],
    ['expires has a space in front', (u, e, s) => `${u.origin}${u.pathname}?expires=%20${e}&signature=${s}`],
    [
      'the signature differs only in its unused bits',
      (u, e, s) => `${u.origin}${u.pathname}?expires=${e}&signature=${flipUnusedBit(s)}`,
    ],
    [
      'the signature has base64 padding',
      (u, e, s) => `${u.origin}${u.pathname}?expires=${e}&signature=${s}%3D`,
    ],
    [
      'expires is given twice',
      (u, e, s) => `${u.origin}${u.pathname}?expires=${e}&signature=${s}&expires=${e}`,
    ],
    [
      'the signature is given twice',
      (u, e, s) => `${u.origin}${u.pathname}?expires=${e}&signature=${s}&signature=${s}`,
    ],
  ];

  for (const [name, rewrite] of rewrites) {
    test(`when ${name} then 403 as for a forged URL, and the URL as written still works`, async () => {
      const pkg = makePackage(manifestFor('com.example.rewrites', '1.0.0'));
      const target = await uploadUrl(service, developer, pkg);
      const url = new URL(target.upload_url);
      const rewritten = rewrite(
        url,
        url.searchParams.get('expires') ?? '',
        url.searchParams.get('signature') ?? '',
      );
      assert.notEqual(rewritten, target.upload_url);

      const refused = await putPackage(rewritten, pkg.bytes);
      assert.equal(refused.status, 403, JSON.stringify(refused.body));
      assert.equal(refused.body.code, 'invalid_upload_url');
      assert.equal((await putPackage(target.upload_url, pkg.bytes)).status, 201);
    });
  }
});

describe('uploads that arrive slowly', () => {
  test('when an upload streams slowly but steadily for longer than SVC_REQUEST_TIMEOUT then it is stored', async () => {
    const pkg = biggerPackage('com.example.steady');
    const target = await uploadUrl(service, developer, pkg);
    // 100 bytes every 100 ms, about 1 KB a second: ten times the minimum rate, for about 2 seconds.
    const reply = await trickle(startPut(target.upload_url, pkg), pieces(pkg.bytes, 100), {
      intervalMs: 100,
      giveUpMs: 20_000,
    });
    assert.equal(reply.status, 201, reply.body);
    assert.equal(JSON.parse(reply.body).sha256, pkg.sha256);
  });

  test('when an upload trickles slower than SVC_MIN_BODY_RATE then it is cut with 408, leaves nothing behind, and the URL works again', async () => {
    const pkg = biggerPackage('com.example.trickle');
    const target = await uploadUrl(service, developer, pkg);
    // A byte every 200 ms: 5 bytes a second, under the 100 the service asks for.
    const reply = await trickle(startPut(target.upload_url, pkg), pieces(pkg.bytes, 1), {
      intervalMs: 200,
      giveUpMs: 15_000,
    });
    assert.equal(reply.status, 408, reply.status === 0 ? 'no answer came' : reply.body);
    assert.match(reply.headers['content-type'] ?? '', /^application\/problem\+json/);
    assert.equal(JSON.parse(reply.body).code, 'request_timeout');
    assert.ok(reply.bodyBytesSent < pkg.size);

    await eventually('the partial file is deleted', () => partialFiles(service.config.dataDir).length === 0);
    assert.equal((await putPackage(target.upload_url, pkg.bytes)).status, 201, 'the URL was released');
  });
});

describe('uploads on several replicas of one store and data folder', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-replicas-'));
  // Each receiver sets its own lease: here one replica holds uploads for 10 s between renewals,
  // another for 1 s. (In one test process a starting replica stalls the others for a moment.)
  let steady: TestService;
  let hasty: TestService;
  let developer: Developer;

  beforeAll(async () => {
    steady = await startTestService({ SVC_UPLOAD_LEASE: '10s' }, { dataDir, clockRuns: true });
    hasty = await startTestService(
      { SVC_UPLOAD_LEASE: '1s' },
      { store: steady.store, dataDir, clockRuns: true },
    );
    developer = await signUpDeveloper(steady.url);
  });
  afterAll(async () => {
    await hasty.stop();
    await steady.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('when a replica starts while uploads run on others then one whose receiver stopped renewing its hold is let go, and one whose bytes flow keeps its URL', async () => {
    const flowing = biggerPackage('com.example.flowing');
    const stalled = biggerPackage('com.example.stalled');
    const flowingTarget = await uploadUrl(steady, developer, flowing);
    const stalledTarget = await uploadUrl(hasty, developer, stalled);

    const stalledPut = startPut(stalledTarget.upload_url, stalled);
    stalledPut.send(stalled.bytes.subarray(0, 100));
    // 10 bytes every 100 ms until the new replica has looked (the whole package would take over
    // 20 seconds, so that it still flows however slowly the replica starts), then the rest at once.
    let looked = false;
    function* flowingBody(): Generator<Buffer> {
      for (let at = 0; at < flowing.size; at += 10) {
        if (looked) {
          yield flowing.bytes.subarray(at);
          return;
        }
        yield flowing.bytes.subarray(at, at + 10);
      }
    }
    const flowingReply = trickle(startPut(flowingTarget.upload_url, flowing), flowingBody(), {
      intervalMs: 100,
      giveUpMs: 60_000,
    });
    await eventually('both uploads are under way', () => partialFiles(dataDir).length === 2);
    // The stalled upload's 1 s hold runs out: renewed once its receiver counted the bytes that
    // came, then never again (unless a sweep of its replica let it go already).
    await eventually('the stalled upload is held for the bytes that came, then no longer', async () => {
      const row = await steady.store.db('uploads').where({ id: stalledTarget.upload_id }).first();
      if (!row.receiving_claim) return true;
      const since = new Date(row.receiving_since).getTime();
      const until = new Date(row.lease_expires_at).getTime();
      return until - since > 1000 && until < Date.now();
    });

    const starting = await startTestService({}, { store: steady.store, dataDir, clockRuns: true });
    try {
      assert.equal(
        partialFiles(dataDir).length,
        1,
        "the stalled upload's partial file is gone, the flowing one's kept",
      );
      const busy = await putPackage(sameUrlOn(starting, flowingTarget.upload_url), flowing.bytes);
      assert.equal(busy.status, 409, 'the flowing upload still holds its URL');
      assert.equal(busy.body.code, 'upload_in_progress');
      assert.equal(
        (await putPackage(sameUrlOn(starting, stalledTarget.upload_url), stalled.bytes)).status,
        201,
      );
      looked = true;
      assert.equal((await flowingReply).status, 201, 'the flowing upload finishes where it started');
    } finally {
      stalledPut.abandon();
      await starting.stop();
    }
  });
});
