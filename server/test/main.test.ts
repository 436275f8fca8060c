import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { call } from './support/http.ts';
import { exitOf, startServiceProcess } from './support/service-process.ts';

const startProcess = (dataDir: string) => startServiceProcess({ dataDir });
const mainModule = join(import.meta.dirname, '../src/main.ts');

describe('npm start', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-data-'));
  after(() => rmSync(dataDir, { recursive: true, force: true }));

  test('when started then it prints where the API, docs and data are', async () => {
    const { child, url, banner } = await startProcess(dataDir);
    try {
      assert.match(banner, new RegExp(`docs\\s+${url}/docs`));
      assert.match(banner, new RegExp(`data\\s+${dataDir} \\(pglite\\)`));
      assert.equal((await call(url, 'GET', '/readyz')).status, 200);
    } finally {
      child.kill('SIGINT');
      await exitOf(child);
    }
  });

  test('when SIGTERM arrives during a request then the request finishes, the process exits 0, and the data is kept', async () => {
    const { child, url } = await startProcess(dataDir);
    const body = JSON.stringify({
      email: 'kept@example.com',
      password: 'correct horse battery staple',
      name: 'Kept',
    });
    const exited = exitOf(child);
    let printed = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      printed += chunk.toString();
    });
    const reply = new Promise<number>((resolve, reject) => {
      const req = request(
        `${url}/api/v1/account/signup`,
        {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      // Half the body now, the signal, then the rest: the request is in flight when the signal lands.
      req.write(body.slice(0, 20));
      setTimeout(() => {
        child.kill('SIGTERM');
        setTimeout(() => req.end(body.slice(20)), 300);
      }, 300);
    });
    assert.equal(await reply, 201);
    assert.equal(await exited, 0);
    assert.match(printed, /svc stopped: requests finished, store closed\./);

    const again = await startProcess(dataDir);
    try {
      const session = await call(again.url, 'POST', '/api/v1/account/sessions', {
        body: { email: 'kept@example.com', password: 'correct horse battery staple' },
      });
      assert.equal(session.status, 201, 'the account made before the signal is still there');
    } finally {
      again.child.kill('SIGINT');
      await exitOf(again.child);
    }
  });

  test('when a setting is wrong then it refuses to start and names the variable', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', mainModule], {
      env: { ...process.env, PORT: 'eighty', DATA_DIR: dataDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    assert.equal(await exitOf(child), 2);
    assert.match(stderr, /^svc: PORT must be a port number/);
  });
});
