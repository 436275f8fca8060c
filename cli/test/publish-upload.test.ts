import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'vitest';
import { uploadPackage } from '../src/publish/upload.ts';
import { svcBinary, userEnv } from './support/svc.ts';

// A stand-in for the presigned-upload target, to see exactly what the CLI sends there.
test('when the package is PUT to the presigned URL then no Authorization header goes with it, the body is whole, and progress reaches the end', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-upload-'));
  const file = join(dir, 'package.tar.gz');
  const content = Buffer.alloc(3 * 1024 * 1024 + 17, 7);
  writeFileSync(file, content);
  let seen: { method?: string; headers?: IncomingHttpHeaders; bytes: number } = { bytes: 0 };
  const server = createServer((req, res) => {
    seen = { method: req.method, headers: req.headers, bytes: 0 };
    req.on('data', (chunk: Buffer) => {
      seen.bytes += chunk.length;
    });
    req.on('end', () => {
      res.writeHead(201, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  try {
    const { port } = server.address() as AddressInfo;
    const progress: number[] = [];
    await uploadPackage(
      {
        upload_url: `http://127.0.0.1:${port}/uploads/x?expires=1&signature=s`,
        method: 'PUT',
        // Even if a service put one here, it must not be sent: the URL is the credential.
        headers: {
          'content-type': 'application/gzip',
          'content-length': String(content.length),
          Authorization: 'Bearer svc_x',
        },
      },
      { path: file, size: content.length },
      (sent) => progress.push(sent),
    );
    assert.equal(seen.method, 'PUT');
    assert.equal(seen.headers?.authorization, undefined);
    assert.equal(seen.headers?.['content-type'], 'application/gzip');
    assert.equal(seen.bytes, content.length);
    assert.equal(progress.at(-1), content.length);
  } finally {
    server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('when Ctrl-C stops an upload then svc exits 130, says nothing was submitted, and leaves no package behind', async () => {
  const scratch = mkdtempSync(join(tmpdir(), 'svc-interrupt-'));
  const temp = join(scratch, 'tmp');
  mkdirSync(temp);
  const requests: string[] = [];
  let child: ChildProcess | undefined;
  const server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url?.split('?')[0]}`);
    const json = (body: unknown) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (req.method === 'GET') return json({ mini_apps: [] });
    if (req.url === '/api/v1/mini-apps/upload-url') {
      const { port } = server.address() as AddressInfo;
      return json({
        upload_id: '2a4b6c8d-0e1f-4a3b-8c5d-6e7f8a9b0c1d',
        upload_url: `http://127.0.0.1:${port}/uploads/2a4b6c8d-0e1f-4a3b-8c5d-6e7f8a9b0c1d?expires=1&signature=s`,
        method: 'PUT',
        headers: { 'content-type': 'application/gzip' },
        expires_at: '2030-01-01T00:00:00Z',
      });
    }
    // The upload: never answered, and the person at the keyboard gives up.
    if (req.method === 'PUT') child?.kill('SIGINT');
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  try {
    const { port } = server.address() as AddressInfo;
    const env = userEnv(join(scratch, 'home'), {
      SVC_API_URL: `http://127.0.0.1:${port}`,
      SVC_TOKEN: 'svc_test_token_00000000000000',
      TMPDIR: temp,
    });
    child = spawn(
      process.execPath,
      [svcBinary, 'publish', join(import.meta.dirname, '../../examples/hello-car')],
      {
        env,
      },
    );
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => child?.once('exit', resolve));
    assert.equal(code, 130, stderr);
    assert.match(stderr, /svc: cancelled: the upload stopped, and nothing was submitted\./);
    assert.ok(!requests.includes('POST /api/v1/mini-apps/submit'));
    assert.deepEqual(readdirSync(temp), [], 'the packed package is removed');
  } finally {
    server.closeAllConnections();
    server.close();
    rmSync(scratch, { recursive: true, force: true });
  }
});
