import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { buildCli } from '../../scripts/build-cli.ts';
import { runCli } from '../src/cli.ts';
import { makeKey } from './support/ssh.ts';
import { userEnv } from './support/svc.ts';
import { onTerminal } from './support/terminal.ts';

describe('svc on a terminal', () => {
  const home = mkdtempSync(join(tmpdir(), 'svc-tty-'));
  let key: { path: string };

  before(async () => {
    await buildCli();
    key = makeKey(home, 'locked_ed25519', { passphrase: 'open sesame' });
  });
  after(() => rmSync(home, { recursive: true, force: true }));

  const env = () => userEnv(home, { SVC_API_URL: 'http://127.0.0.1:9', TERM: 'dumb' });

  test('when the key has a passphrase then it is asked for without echo, and used', async () => {
    const { screen } = await onTerminal(['login', '--key', key.path], env(), 'open sesame');
    assert.match(screen, /Passphrase for .*locked_ed25519: /);
    assert.doesNotMatch(screen, /open sesame/, 'the passphrase is not echoed');
    // The key opened, so login went on to the (unreachable) service.
    assert.match(screen, /cannot reach the svc service/);
  });

  test('when the typed passphrase is wrong then it says so', async () => {
    const { code, screen } = await onTerminal(['login', '--key', key.path], env(), 'not it');
    assert.equal(code, 1);
    assert.match(screen, /passphrase for .*locked_ed25519 is not right/);
  });
});

describe('svc colours', () => {
  const ansi = `${String.fromCharCode(27)}[`;

  async function usageError(env: NodeJS.ProcessEnv) {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let text = '';
    stderr.on('data', (chunk: Buffer) => {
      text += chunk.toString();
    });
    const code = await runCli(['keys', 'remove'], {
      env,
      stdin: new PassThrough(),
      stdout,
      stderr,
      colorDepth: 256,
      home: tmpdir(),
    });
    return { code, text };
  }

  test('when the terminal has colours then errors are coloured, and with NO_COLOR they are not', async () => {
    const coloured = await usageError({});
    assert.equal(coloured.code, 2);
    assert.ok(coloured.text.includes(ansi), 'ANSI colour codes');
    const plain = await usageError({ NO_COLOR: '1' });
    assert.equal(plain.code, 2);
    assert.ok(!plain.text.includes(ansi), 'no ANSI colour codes');
    assert.match(plain.text, /Not enough positional arguments/);
  });
});
