import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { uploadPackage } from '../src/publish/upload.ts';

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
