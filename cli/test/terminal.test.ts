import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { makeKey, sshKeyRecord } from '../../server/test/support/ssh.ts';
import { runCli } from '../src/cli.ts';
import { userEnv } from './support/svc.ts';
import { onTerminal } from './support/terminal.ts';

describe('svc on a terminal', () => {
  const home = mkdtempSync(join(tmpdir(), 'svc-tty-'));
  let key: { path: string };

  beforeAll(async () => {
    key = makeKey(home, 'locked_ed25519', { passphrase: 'open sesame' });
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  const env = () => userEnv(home, { SVC_API_URL: 'http://127.0.0.1:9', TERM: 'dumb' });

  test('when the key has a passphrase then it is asked for without echo, and used', async () => {
    const { screen } = await onTerminal(['login', '--key', key.path], env(), 'open sesame');
    assert.match(screen, /Passphrase for .*locked_ed25519: /);
    assert.doesNotMatch(screen, /open sesame/, 'the passphrase is not echoed');
    // The key opened, so login went on to the (unreachable) service.
    assert.match(screen, /cannot reach the svc service/);
  });

  test('when Ctrl-C is pressed at the passphrase prompt then svc stops quietly with 130', async () => {
    const { code, screen } = await onTerminal(['login', '--key', key.path], env(), '\u0003');
    assert.equal(code, 130, screen);
    assert.doesNotMatch(screen, /went wrong|cancelled/);
  });

  test('when the typed passphrase is wrong then it says so', async () => {
    const { code, screen } = await onTerminal(['login', '--key', key.path], env(), 'not it');
    assert.equal(code, 1);
    assert.match(screen, /passphrase for .*locked_ed25519 is not right/);
  });
});

describe('removing the last key on a terminal', () => {
  const home = mkdtempSync(join(tmpdir(), 'svc-tty-keys-'));
  const id = '3c1e2d4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f';
  const requests: string[] = [];
  let server: Server;
  let url = '';

  beforeAll(async () => {
    server = createServer((req, res) => {
      requests.push(`${req.method} ${req.url}`);
      if (req.method === 'DELETE') {
        res.writeHead(204).end();
        return;
      }
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ keys: [sshKeyRecord(id)] }));
    });
    server.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    server.close();
    rmSync(home, { recursive: true, force: true });
  });

  const env = () => userEnv(home, { SVC_API_URL: url, SVC_TOKEN: 'svc_test', TERM: 'dumb' });

  test('when the answer is no then the key stays, and svc said how one gets back in', async () => {
    const { code, screen } = await onTerminal(['keys', 'remove', id], env(), 'n', 'Remove it?');
    assert.equal(code, 1, screen);
    assert.match(
      screen,
      /is your last key\. To sign in again, add a public key in the service's web console \(http:\/\/127\.0\.0\.1:\d+\/console\/keys\)/,
    );
    assert.match(screen, /Nothing removed/);
    assert.ok(!requests.some((r) => r.startsWith('DELETE')));
  });

  test('when the answer is yes then the key is removed', async () => {
    const { code, screen } = await onTerminal(['keys', 'remove', id], env(), 'yes', 'Remove it?');
    assert.equal(code, 0, screen);
    assert.match(screen, /Removed key/);
    assert.ok(requests.includes(`DELETE /api/v1/dev/keys/${id}`));
  });
});

describe('svc colours', () => {
  const ansi = `${String.fromCharCode(27)}[`;

  async function help(env: NodeJS.ProcessEnv) {
    const stdout = new PassThrough();
    let text = '';
    stdout.on('data', (chunk: Buffer) => {
      text += chunk.toString();
    });
    const code = await runCli(['keys', 'remove', '--help'], {
      env,
      stdin: new PassThrough(),
      stdout,
      stderr: new PassThrough(),
      colorDepth: 256,
      home: tmpdir(),
    });
    return { code, text };
  }

  test('when the terminal has colours then help is coloured, and with NO_COLOR it is not', async () => {
    const coloured = await help({});
    assert.equal(coloured.code, 0);
    assert.ok(coloured.text.includes(ansi), 'ANSI colour codes');
    const plain = await help({ NO_COLOR: '1' });
    assert.equal(plain.code, 0);
    assert.ok(!plain.text.includes(ansi), 'no ANSI colour codes');
    assert.match(plain.text, /svc keys remove/);
  });
});
