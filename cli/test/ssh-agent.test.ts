import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fingerprint, loginNamespace, parsePublicKeyLine, signSshsig } from '@svc/ssh';
import { afterAll, describe, test } from 'vitest';
import { agentSigner, listAgentKeys, SshAgentError, type SshAgentErrorCode } from '../src/ssh-agent.ts';

// A real ssh-agent, ssh-add and ssh-keygen, all in a temp dir that goes when the tests end.
const dir = mkdtempSync(join(tmpdir(), 'svc-agent-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// The developer's own agent, display and askpass must not leak into the tests.
const baseEnv = Object.fromEntries(
  Object.entries(process.env).filter(
    ([name]) => !/^(SSH_AUTH_SOCK|SSH_AGENT_PID|SSH_ASKPASS.*|DISPLAY)$/.test(name),
  ),
);

// ssh-add and ssh-agent ask through SSH_ASKPASS when forced to: one script answers with the
// passphrase it is given in the environment, the other declines (as a user refusing a confirmation).
const askpass = join(dir, 'askpass');
writeFileSync(askpass, '#!/bin/sh\nprintf \'%s\\n\' "$SVC_TEST_ASKPASS"\n', { mode: 0o700 });
const declinePrompt = join(dir, 'decline');
writeFileSync(declinePrompt, '#!/bin/sh\nexit 1\n', { mode: 0o700 });
const askpassEnv = { DISPLAY: ':0', SSH_ASKPASS_REQUIRE: 'force' };

const agentSocket = join(dir, 'agent.sock');
const agent = await startAgent();
afterAll(() => agent.kill());

function startAgent(): Promise<ChildProcess> {
  const child = spawn('ssh-agent', ['-a', agentSocket, '-D'], {
    env: { ...baseEnv, ...askpassEnv, SSH_ASKPASS: declinePrompt },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`ssh-agent did not start: ${output}`)), 5_000);
    const collect = (chunk: Buffer): void => {
      output += chunk.toString('utf8');
      // It prints the shell line for SSH_AUTH_SOCK once it listens.
      if (output.includes('SSH_AUTH_SOCK=')) {
        clearTimeout(timer);
        resolve(child);
      }
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`ssh-agent exited with ${code}: ${output}`));
    });
  });
}

function run(
  command: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; input?: string } = {},
): string {
  return execFileSync(command, args, {
    env: { ...baseEnv, ...options.env },
    input: options.input ?? '',
    stdio: 'pipe',
  }).toString('utf8');
}

function sshAdd(args: string[], passphrase = ''): string {
  return run('ssh-add', args, {
    env: { ...askpassEnv, SSH_AUTH_SOCK: agentSocket, SSH_ASKPASS: askpass, SVC_TEST_ASKPASS: passphrase },
  });
}

interface KeyFiles {
  path: string;
  publicLine: string;
  publicKeyBlob: Buffer;
  comment: string;
}

function generateKey(name: string, passphrase = ''): KeyFiles {
  const path = join(dir, name);
  const comment = `${name}@example`;
  run('ssh-keygen', ['-q', '-t', 'ed25519', '-C', comment, '-N', passphrase, '-f', path]);
  const publicLine = readFileSync(`${path}.pub`, 'utf8');
  return { path, publicLine, publicKeyBlob: parsePublicKeyLine(publicLine).publicKeyBlob, comment };
}

let fileCount = 0;

function tempFile(content: string): string {
  fileCount += 1;
  const path = join(dir, `file-${fileCount}`);
  writeFileSync(path, content);
  return path;
}

/** Runs `ssh-keygen -Y verify` as a server operator would; throws when it refuses. */
function sshKeygenVerify(key: KeyFiles, armored: string, signed: string): string {
  const allowedSigners = tempFile(`id ${key.publicLine}`);
  const signature = tempFile(armored);
  return run(
    'ssh-keygen',
    ['-Y', 'verify', '-f', allowedSigners, '-I', 'id', '-n', loginNamespace, '-s', signature],
    { input: signed },
  );
}

/** What `ssh-keygen -Y sign` writes, from the key file; ed25519 is deterministic, so an agent must match it. */
function sshKeygenSign(key: KeyFiles, signed: string): string {
  const path = tempFile(signed);
  run('ssh-keygen', ['-Y', 'sign', '-n', loginNamespace, '-f', key.path, path]);
  return readFileSync(`${path}.sig`, 'utf8');
}

async function assertAgentError(
  promise: Promise<unknown>,
  code: SshAgentErrorCode,
  expected?: RegExp | string,
): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof SshAgentError, `expected an SshAgentError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    if (typeof expected === 'string') assert.equal(error.message, expected);
    else if (expected) assert.match(error.message, expected);
    return true;
  });
}

/** What svc says when the agent will not sign: the key, the likely cause and the fix. */
function refusal(key: KeyFiles): string {
  return (
    `ssh-agent refused to sign with ${fingerprint(key)}: is the key confirmed/locked? ` +
    'Approve its confirmation prompt, or unlock the agent with ssh-add -X.'
  );
}

const message = [
  'svc-login',
  'challenge: 0b7e7d1c-5a43-4d4b-9a52-8f3f0f6c2f10',
  'nonce: q3vJ2n8cUQ1m1v0bq8w3m5nq2aH6Yl0bX2dWl2s7n1A',
  'audience: https://svc.example',
  'fingerprint: SHA256:placeholder',
  'expires: 2026-01-01T00:00:00Z',
].join('\n');

const passphrase = 'correct horse battery staple';
const dev = generateKey('dev');
const encrypted = generateKey('encrypted', passphrase);
const confirmed = generateKey('confirmed');
const stranger = generateKey('stranger');

// Taken before the key file goes: what the agent signs must be this, byte for byte.
const devSignedByFile = sshKeygenSign(dev, message);

sshAdd([dev.path]);
sshAdd([encrypted.path], passphrase);
sshAdd(['-c', confirmed.path]);
// From here on only the agent holds these private keys: signing cannot have read a file.
for (const key of [dev, encrypted]) {
  rmSync(key.path);
  assert.equal(existsSync(key.path), false);
}

describe('listAgentKeys, against a real ssh-agent', () => {
  test('when the agent holds keys, then it lists each with its comment, as ssh-add -L does', async () => {
    const keys = await listAgentKeys(agentSocket);
    assert.deepEqual(
      keys.map((key) => ({ blob: key.publicKeyBlob.toString('base64'), comment: key.comment })),
      [dev, encrypted, confirmed].map((key) => ({
        blob: key.publicKeyBlob.toString('base64'),
        comment: key.comment,
      })),
    );
    const listed = sshAdd(['-L']).trim().split('\n');
    assert.deepEqual(
      listed.map((line) => parsePublicKeyLine(line).comment),
      keys.map((key) => key.comment),
    );
  });
});

describe('agentSigner, against a real ssh-agent', { timeout: 20_000 }, () => {
  test('when the agent holds the key, then ssh-keygen -Y verify accepts its signature, though the key file is gone', async () => {
    const signer = await agentSigner(agentSocket, dev.publicKeyBlob);
    assert.ok(signer, 'the agent holds the key');
    assert.equal(signer.comment, dev.comment);
    assert.ok(signer.publicKeyBlob.equals(dev.publicKeyBlob));

    const armored = await signSshsig(message, signer, loginNamespace);
    assert.match(sshKeygenVerify(dev, armored, message), /Good "svc-login" signature for id/);
    assert.equal(armored, devSignedByFile);
  });

  test('when the key was added with its passphrase, then it signs with neither passphrase nor file', async () => {
    const signer = await agentSigner(agentSocket, encrypted.publicKeyBlob);
    assert.ok(signer, 'the agent holds the key');
    const armored = await signSshsig(message, signer, loginNamespace);
    assert.match(sshKeygenVerify(encrypted, armored, message), /Good "svc-login" signature for id/);
  });

  test('when the agent does not hold the key, then there is no signer', async () => {
    assert.equal(await agentSigner(agentSocket, stranger.publicKeyBlob), undefined);
  });

  test('when SSH_AUTH_SOCK is unset or empty, then there is no signer', async () => {
    assert.equal(await agentSigner(undefined, dev.publicKeyBlob), undefined);
    assert.equal(await agentSigner('', dev.publicKeyBlob), undefined);
  });

  test('when nothing listens at the socket path, then there is no signer, and listing says why', async () => {
    const missing = join(dir, 'no-such-agent.sock');
    const notASocket = tempFile('just a file');
    assert.equal(await agentSigner(missing, dev.publicKeyBlob), undefined);
    assert.equal(await agentSigner(notASocket, dev.publicKeyBlob), undefined);
    await assertAgentError(
      listAgentKeys(missing),
      'unreachable',
      /no ssh-agent answers at .*no-such-agent\.sock/,
    );
  });

  test('when the user declines the confirmation of a key added with -c, then signing fails and says why', async () => {
    const signer = await agentSigner(agentSocket, confirmed.publicKeyBlob);
    assert.ok(signer, 'the agent lists the key');
    await assertAgentError(signSshsig(message, signer, loginNamespace), 'refused', refusal(confirmed));
  });

  test('when the agent is locked, then it lists no key, and a signer from before is refused', async () => {
    const signer = await agentSigner(agentSocket, dev.publicKeyBlob);
    assert.ok(signer, 'the agent holds the key');
    sshAdd(['-x'], 'lock password');
    try {
      assert.equal(await agentSigner(agentSocket, dev.publicKeyBlob), undefined);
      await assertAgentError(signSshsig(message, signer, loginNamespace), 'refused', refusal(dev));
    } finally {
      sshAdd(['-X'], 'lock password');
    }
    assert.equal(await signSshsig(message, signer, loginNamespace), devSignedByFile);
  });

  // Last: it empties the agent the tests above use.
  test('when the agent was emptied with ssh-add -D, then it lists nothing and there is no signer', async () => {
    sshAdd(['-D']);
    assert.deepEqual(await listAgentKeys(agentSocket), []);
    assert.equal(await agentSigner(agentSocket, dev.publicKeyBlob), undefined);
  });
});

/** A unix socket that answers each request as `answer` says, and tells whether svc closed every connection. */
interface FakeAgent {
  path: string;
  requests: Buffer[];
  /** Resolves once every connection svc opened is closed; rejects if one stays open for a second. */
  allClosed(): Promise<void>;
}

const fakeServers: Server[] = [];
afterAll(() => {
  for (const server of fakeServers) server.close();
});

let fakeCount = 0;

async function fakeAgent(answer: (request: Buffer, socket: Socket) => void): Promise<FakeAgent> {
  fakeCount += 1;
  const path = join(dir, `fake-${fakeCount}.sock`);
  const requests: Buffer[] = [];
  const closings: Promise<void>[] = [];
  const server = createServer((socket) => {
    closings.push(new Promise((resolve) => socket.once('close', () => resolve())));
    let received = Buffer.alloc(0);
    socket.on('error', () => {});
    socket.on('data', (chunk) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < 4 || received.length < 4 + received.readUInt32BE(0)) return;
      const request = received.subarray(4, 4 + received.readUInt32BE(0));
      received = received.subarray(4 + request.length);
      requests.push(request);
      answer(request, socket);
    });
  });
  fakeServers.push(server);
  await new Promise<void>((resolve) => server.listen(path, resolve));
  return {
    path,
    requests,
    allClosed: () =>
      Promise.race([
        Promise.all(closings).then(() => undefined),
        delay(1_000).then(() => {
          throw new Error('svc left a connection to the agent open');
        }),
      ]),
  };
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function uint32(value: number): Buffer {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(value);
  return bytes;
}

function sshString(value: string | Buffer): Buffer {
  const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
  return Buffer.concat([uint32(bytes.length), bytes]);
}

/** One agent message: the uint32 length, then the type byte and the rest. */
function agentMessage(type: number, ...parts: Buffer[]): Buffer {
  const body = Buffer.concat([Buffer.from([type]), ...parts]);
  return Buffer.concat([uint32(body.length), body]);
}

function identitiesAnswer(...keys: KeyFiles[]): Buffer {
  return agentMessage(
    12,
    uint32(keys.length),
    ...keys.flatMap((key) => [sshString(key.publicKeyBlob), sshString(key.comment)]),
  );
}

const failure = agentMessage(5);

describe('against an agent that misbehaves', { timeout: 20_000 }, () => {
  test('when the answer arrives a byte at a time, then it is read whole', async () => {
    const agent = await fakeAgent(async (_request, socket) => {
      for (const byte of identitiesAnswer(dev, stranger)) {
        socket.write(Buffer.from([byte]));
        await delay(1);
      }
    });
    const keys = await listAgentKeys(agent.path);
    assert.deepEqual(
      keys.map((key) => key.comment),
      [dev.comment, stranger.comment],
    );
    assert.deepEqual(agent.requests, [Buffer.from([11])]);
    await agent.allClosed();
  });

  test('when one write holds the answer and another message, then the first is the answer', async () => {
    const agent = await fakeAgent((_request, socket) => {
      socket.write(Buffer.concat([identitiesAnswer(dev), identitiesAnswer(stranger), Buffer.from([0, 0])]));
    });
    const keys = await listAgentKeys(agent.path);
    assert.deepEqual(
      keys.map((key) => key.comment),
      [dev.comment],
    );
    await agent.allClosed();
  });

  test('when the socket is an sshd, then its banner reads as a huge length, refused at once', async () => {
    const agent = await fakeAgent((_request, socket) => socket.write('SSH-2.0-OpenSSH_9.2p1\r\n'));
    const started = Date.now();
    await assertAgentError(
      listAgentKeys(agent.path),
      'too_large',
      /announced a \d+-byte message, over the 262144-byte limit/,
    );
    assert.ok(Date.now() - started < 1_000, 'it did not wait for the timeout');
    await agent.allClosed();
  });

  test('when the length is 0xffffffff, then it is refused without reading what follows', async () => {
    const agent = await fakeAgent((_request, socket) => {
      socket.write(Buffer.from([0xff, 0xff, 0xff, 0xff]));
      socket.write(Buffer.alloc(64 * 1024, 0x41));
    });
    await assertAgentError(listAgentKeys(agent.path), 'too_large');
    await agent.allClosed();
  });

  test('when an honest answer is over a smaller limit given, then it is refused', async () => {
    const agent = await fakeAgent((_request, socket) => socket.write(identitiesAnswer(dev, stranger)));
    await assertAgentError(listAgentKeys(agent.path, { maxMessageLength: 64 }), 'too_large');
    await agent.allClosed();
  });

  test('when the agent starts a message and stops, then the request times out and the socket is closed', async () => {
    const agent = await fakeAgent((_request, socket) => socket.write(Buffer.from([0, 0, 0, 9, 12, 0])));
    const started = Date.now();
    await assertAgentError(
      listAgentKeys(agent.path, { timeoutMs: 200 }),
      'timeout',
      /did not answer within 200 ms/,
    );
    assert.ok(Date.now() - started >= 190, 'it waited for the timeout');
    await agent.allClosed();
  });

  test('when the agent never answers, then agentSigner times out instead of hanging', async () => {
    const agent = await fakeAgent(() => {});
    await assertAgentError(agentSigner(agent.path, dev.publicKeyBlob, { timeoutMs: 200 }), 'timeout');
    await agent.allClosed();
  });

  test('when the agent hangs up without answering, then it says so', async () => {
    const agent = await fakeAgent((_request, socket) => socket.end());
    await assertAgentError(listAgentKeys(agent.path), 'closed', /hung up without answering/);
    await agent.allClosed();
  });

  test('when the agent answers nonsense, then agentSigner rejects rather than passing the agent for absent', async () => {
    const nonsense = [
      { answer: agentMessage(14, sshString('not a key list')), problem: /unexpected message \(type 14\)/ },
      { answer: agentMessage(12, uint32(1000), sshString(dev.publicKeyBlob)), problem: /damaged message/ },
      {
        answer: Buffer.concat([identitiesAnswer(dev).subarray(4, 5), identitiesAnswer(dev)]),
        problem: /announced/,
      },
      { answer: uint32(0), problem: /empty message/ },
      { answer: agentMessage(12, uint32(0), Buffer.from('trailing')), problem: /runs on past its end/ },
    ];
    for (const { answer, problem } of nonsense) {
      const agent = await fakeAgent((_request, socket) => socket.write(answer));
      await assert.rejects(
        agentSigner(agent.path, dev.publicKeyBlob, { timeoutMs: 500 }),
        (error: unknown) => {
          assert.ok(error instanceof SshAgentError, String(error));
          assert.notEqual(error.code, 'unreachable');
          assert.match(error.message, problem);
          return true;
        },
      );
      await agent.allClosed();
    }
  });

  test('when the agent lists the key but answers the signing with garbage, then signing fails', async () => {
    const agent = await fakeAgent((request, socket) =>
      socket.write(request[0] === 11 ? identitiesAnswer(dev) : agentMessage(14, uint32(500))),
    );
    const signer = await agentSigner(agent.path, dev.publicKeyBlob);
    assert.ok(signer);
    await assertAgentError(signSshsig(message, signer, loginNamespace), 'malformed', /damaged message/);
    await agent.allClosed();
  });

  test('when the agent refuses to sign, then the error names the key and the likely cause', async () => {
    const agent = await fakeAgent((request, socket) =>
      socket.write(request[0] === 11 ? identitiesAnswer(dev) : failure),
    );
    const signer = await agentSigner(agent.path, dev.publicKeyBlob);
    assert.ok(signer);
    await assertAgentError(signSshsig(message, signer, loginNamespace), 'refused', refusal(dev));
    // The sign request is what draft-miller-ssh-agent says: type 13, key blob, data, flags 0.
    const signRequest = agent.requests[1];
    assert.ok(signRequest);
    assert.equal(signRequest[0], 13);
    assert.ok(signRequest.subarray(5, 5 + dev.publicKeyBlob.length).equals(dev.publicKeyBlob));
    assert.ok(signRequest.subarray(-4).equals(uint32(0)));
    await agent.allClosed();
  });

  test('when the agent refuses to list its keys, then listing says so', async () => {
    const agent = await fakeAgent((_request, socket) => socket.write(failure));
    await assertAgentError(listAgentKeys(agent.path), 'refused', /refused to list its keys/);
    await agent.allClosed();
  });
});
