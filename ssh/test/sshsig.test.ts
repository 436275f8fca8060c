import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, test } from 'vitest';
import {
  fingerprint,
  formatPublicKeyLine,
  isEncryptedPrivateKey,
  loginNamespace,
  parsePrivateKey,
  parsePublicKeyLine,
  SshKeyError,
  type SshKeyErrorCode,
  type SshSigner,
  type SshsigRefusal,
  signSshsig,
  sshsigRefusal,
  verifySshsig,
} from '../src/index.ts';

// Every key and signature the tests check against comes from the real ssh-keygen, in a temp dir.
const dir = mkdtempSync(join(tmpdir(), 'svc-sshsig-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// ssh-keygen would reach for a running agent, and prompt on a TTY; neither belongs in a test.
const sshEnv = Object.fromEntries(
  Object.entries(process.env).filter(([name]) => name !== 'SSH_AUTH_SOCK' && name !== 'DISPLAY'),
);

function sshKeygen(args: string[], input?: string | Buffer): string {
  return execFileSync('ssh-keygen', args, { env: sshEnv, input: input ?? '', stdio: 'pipe' }).toString(
    'utf8',
  );
}

interface KeyFiles {
  path: string;
  pem: string;
  publicLine: string;
}

function generateKey(name: string, args: string[]): KeyFiles {
  const path = join(dir, name);
  sshKeygen(['-q', '-C', `${name}@example`, '-f', path, ...args]);
  return { path, pem: readFileSync(path, 'utf8'), publicLine: readFileSync(`${path}.pub`, 'utf8') };
}

const passphrase = 'correct horse battery staple';
const ed25519 = generateKey('dev', ['-t', 'ed25519', '-N', '']);
const otherEd25519 = generateKey('other', ['-t', 'ed25519', '-N', '']);
const encryptedEd25519 = generateKey('encrypted', ['-t', 'ed25519', '-N', passphrase]);
const gcmEd25519 = generateKey('gcm', ['-t', 'ed25519', '-N', passphrase, '-Z', 'aes256-gcm@openssh.com']);
const rsa = generateKey('rsa', ['-t', 'rsa', '-b', '2048', '-N', '']);
const encryptedRsa = generateKey('rsa-encrypted', ['-t', 'rsa', '-b', '2048', '-N', passphrase]);
const pemRsa = generateKey('rsa-pem', ['-t', 'rsa', '-b', '2048', '-N', '', '-m', 'PEM']);
const ecdsa = generateKey('ecdsa', ['-t', 'ecdsa', '-N', '']);

const message = [
  'svc-login',
  'challenge: 0b7e7d1c-5a43-4d4b-9a52-8f3f0f6c2f10',
  'nonce: q3vJ2n8cUQ1m1v0bq8w3m5nq2aH6Yl0bX2dWl2s7n1A',
  'audience: https://svc.example',
  'fingerprint: SHA256:placeholder',
  'expires: 2026-01-01T00:00:00Z',
].join('\n');

let fileCount = 0;

function tempFile(content: string | Buffer): string {
  fileCount += 1;
  const path = join(dir, `file-${fileCount}`);
  writeFileSync(path, content);
  return path;
}

/** What `ssh-keygen -Y sign` writes to `<file>.sig`. */
function sshKeygenSign(key: KeyFiles, signed: string | Buffer, extra: string[] = []): string {
  const path = tempFile(signed);
  sshKeygen(['-Y', 'sign', '-n', loginNamespace, '-f', key.path, ...extra, path]);
  return readFileSync(`${path}.sig`, 'utf8');
}

/** Runs `ssh-keygen -Y verify` and returns its verdict line; throws when it refuses. */
function sshKeygenVerify(key: KeyFiles, armored: string, signed: string, namespace = loginNamespace): string {
  const allowedSigners = tempFile(`dev@example ${key.publicLine}`);
  const signature = tempFile(armored);
  return sshKeygen(
    ['-Y', 'verify', '-f', allowedSigners, '-I', 'dev@example', '-n', namespace, '-s', signature],
    signed,
  );
}

function assertKeyError(action: () => unknown, code: SshKeyErrorCode, messagePattern?: RegExp): void {
  assert.throws(action, (error: unknown) => {
    assert.ok(error instanceof SshKeyError, `expected an SshKeyError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    if (messagePattern) assert.match(error.message, messagePattern);
    return true;
  });
}

function assertRefused(armored: unknown, refusal: SshsigRefusal, overrides: { message?: string } = {}): void {
  const verification = {
    armored,
    message: overrides.message ?? message,
    namespace: loginNamespace,
    publicKey: ed25519.publicLine,
  };
  assert.equal(sshsigRefusal(verification), refusal);
  assert.equal(verifySshsig(verification), false);
}

/** The fields of an SSHSIG blob, so a test can alter one and armor it again. */
interface SshsigFields {
  magic: Buffer;
  version: number;
  publicKeyBlob: Buffer;
  namespace: Buffer;
  reserved: Buffer;
  hashAlgorithm: Buffer;
  signature: Buffer;
  trailing: Buffer;
}

function decodeSshsig(armored: string): SshsigFields {
  const base64 = armored.trim().split('\n').slice(1, -1).join('');
  const bytes = Buffer.from(base64, 'base64');
  let offset = 6;
  const readString = (): Buffer => {
    const length = bytes.readUInt32BE(offset);
    const value = bytes.subarray(offset + 4, offset + 4 + length);
    offset += 4 + length;
    return value;
  };
  const magic = bytes.subarray(0, 6);
  const version = bytes.readUInt32BE(offset);
  offset += 4;
  return {
    magic,
    version,
    publicKeyBlob: readString(),
    namespace: readString(),
    reserved: readString(),
    hashAlgorithm: readString(),
    signature: readString(),
    trailing: bytes.subarray(offset),
  };
}

function encodeSshsig(fields: SshsigFields): string {
  const uint32 = (value: number): Buffer => {
    const bytes = Buffer.alloc(4);
    bytes.writeUInt32BE(value);
    return bytes;
  };
  const sshString = (value: Buffer): Buffer => Buffer.concat([uint32(value.length), value]);
  const bytes = Buffer.concat([
    fields.magic,
    uint32(fields.version),
    sshString(fields.publicKeyBlob),
    sshString(fields.namespace),
    sshString(fields.reserved),
    sshString(fields.hashAlgorithm),
    sshString(fields.signature),
    fields.trailing,
  ]);
  const lines = bytes.toString('base64').match(/.{1,70}/g) ?? [];
  return ['-----BEGIN SSH SIGNATURE-----', ...lines, '-----END SSH SIGNATURE-----', ''].join('\n');
}

function alterSshsig(armored: string, change: Partial<SshsigFields>): string {
  return encodeSshsig({ ...decodeSshsig(armored), ...change });
}

/** A key or signature blob: string type, string bytes. */
function sshBlob(type: string, bytes: Buffer): Buffer {
  const parts = [Buffer.from(type), bytes].map((part) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(part.length);
    return Buffer.concat([length, part]);
  });
  return Buffer.concat(parts);
}

describe('fingerprint', () => {
  for (const key of [ed25519, otherEd25519]) {
    test(`when given the ${key.path.split('/').at(-1)} .pub line, then it equals what ssh-keygen -l prints`, () => {
      const printed = sshKeygen(['-l', '-E', 'sha256', '-f', `${key.path}.pub`]).split(' ')[1];
      assert.equal(fingerprint(parsePublicKeyLine(key.publicLine)), printed);
    });
  }

  test('when given the key read from the private file or its blob, then it is the same fingerprint', () => {
    const printed = sshKeygen(['-l', '-E', 'sha256', '-f', `${ed25519.path}.pub`]).split(' ')[1];
    const privateKey = parsePrivateKey(ed25519.pem);
    assert.equal(fingerprint(privateKey), printed);
    assert.equal(fingerprint(privateKey.publicKeyBlob), printed);
  });
});

describe('parsePublicKeyLine', () => {
  test('when given a .pub file of ssh-keygen, then it reads the type, key and comment', () => {
    const key = parsePublicKeyLine(ed25519.publicLine);
    const [type, keyBase64] = ed25519.publicLine.trim().split(' ');
    assert.equal(key.type, 'ssh-ed25519');
    assert.equal(key.type, type);
    assert.equal(key.keyBase64, keyBase64);
    assert.equal(key.comment, 'dev@example');
    assert.equal(key.publicKey.length, 32);
    assert.deepEqual(key.publicKeyBlob, Buffer.from(keyBase64 ?? '', 'base64'));
  });

  test('when the line has no comment, then the comment is empty', () => {
    const { type, keyBase64 } = parsePublicKeyLine(ed25519.publicLine);
    const key = parsePublicKeyLine(`${type} ${keyBase64}`);
    assert.equal(key.comment, '');
    assert.equal(key.keyBase64, keyBase64);
  });

  test('when the comment holds spaces and the line is pasted with CRLF and indentation, then it keeps the comment', () => {
    const { type, keyBase64 } = parsePublicKeyLine(ed25519.publicLine);
    assert.equal(parsePublicKeyLine(`  ${type} ${keyBase64} Ada  laptop 2\r\n`).comment, 'Ada  laptop 2');
  });

  test('when formatted back, then it is the line ssh-keygen wrote', () => {
    assert.equal(formatPublicKeyLine(parsePublicKeyLine(ed25519.publicLine)), ed25519.publicLine.trim());
    assert.equal(formatPublicKeyLine(parsePrivateKey(ed25519.pem)), ed25519.publicLine.trim());
  });

  test('when given an RSA key, then it is unsupported_key_type naming ssh-rsa', () => {
    assertKeyError(
      () => parsePublicKeyLine(rsa.publicLine),
      'unsupported_key_type',
      /only ssh-ed25519 keys are supported; this key is ssh-rsa/,
    );
  });

  test('when given an ECDSA key, then it is unsupported_key_type naming its type', () => {
    assertKeyError(() => parsePublicKeyLine(ecdsa.publicLine), 'unsupported_key_type', /ecdsa-sha2-nistp256/);
  });

  const malformed: [string, string, RegExp][] = [
    ['garbage', 'hello world, this is my key', /not valid base64/],
    ['an empty string', '', /empty/],
    ['a type word alone', 'ssh-ed25519', /no key/],
    ['two keys on two lines', `${ed25519.publicLine}${otherEd25519.publicLine}`, /several lines/],
    ['an authorized_keys line with options', `from="10.0.0.1",no-pty ${ed25519.publicLine}`, /options/],
    ['a key cut on a base64 boundary', ed25519.publicLine.replace(/(AAAA\S{20})\S+/, '$1'), /cut short/],
    ['a key cut anywhere', ed25519.publicLine.replace(/(AAAA\S{21})\S+/, '$1'), /base64/],
    ['a private key', ed25519.pem, /PEM block/],
    ['a control character in the comment', ed25519.publicLine.replace('dev@', 'dev\u0007@'), /control/],
  ];
  for (const [what, line, messagePattern] of malformed) {
    test(`when given ${what}, then it is malformed_key`, () => {
      assertKeyError(() => parsePublicKeyLine(line), 'malformed_key', messagePattern);
    });
  }

  test('when the key inside disagrees with the type word, then it is malformed_key naming both', () => {
    const { keyBase64 } = parsePublicKeyLine(ed25519.publicLine);
    assertKeyError(
      () => parsePublicKeyLine(`ssh-rsa ${keyBase64} dev@example`),
      'malformed_key',
      /inside is ssh-ed25519 but the line says ssh-rsa/,
    );
    const rsaBase64 = rsa.publicLine.split(' ')[1];
    assertKeyError(
      () => parsePublicKeyLine(`ssh-ed25519 ${rsaBase64}`),
      'malformed_key',
      /inside is ssh-rsa/,
    );
  });

  test('when the ed25519 key is a small-order point anyone could sign for, then it is malformed_key', () => {
    const identity = Buffer.alloc(32);
    identity[0] = 1;
    const blob = sshBlob('ssh-ed25519', identity).toString('base64');
    assertKeyError(() => parsePublicKeyLine(`ssh-ed25519 ${blob}`), 'malformed_key', /degenerate/);
  });

  test('when the ed25519 key has a byte too many, then it is malformed_key', () => {
    const { publicKeyBlob } = parsePublicKeyLine(ed25519.publicLine);
    const longer = Buffer.concat([publicKeyBlob, Buffer.from([0])]).toString('base64');
    assertKeyError(() => parsePublicKeyLine(`ssh-ed25519 ${longer}`), 'malformed_key');
  });
});

describe('parsePrivateKey', () => {
  test('when given an unencrypted ed25519 key, then it reads the key that the .pub file holds', () => {
    const key = parsePrivateKey(ed25519.pem);
    assert.equal(isEncryptedPrivateKey(ed25519.pem), false);
    assert.equal(key.type, 'ssh-ed25519');
    assert.equal(key.comment, 'dev@example');
    assert.deepEqual(key.publicKeyBlob, parsePublicKeyLine(ed25519.publicLine).publicKeyBlob);
    assert.deepEqual(key.publicKey, parsePublicKeyLine(ed25519.publicLine).publicKey);
  });

  test('when the file has CRLF line ends, then it reads the same key', () => {
    const key = parsePrivateKey(ed25519.pem.replaceAll('\n', '\r\n'));
    assert.equal(fingerprint(key), fingerprint(parsePublicKeyLine(ed25519.publicLine)));
  });

  test('when the key is encrypted and no passphrase is given, then it is passphrase_required', () => {
    assert.equal(isEncryptedPrivateKey(encryptedEd25519.pem), true);
    assertKeyError(() => parsePrivateKey(encryptedEd25519.pem), 'passphrase_required');
    assertKeyError(() => parsePrivateKey(encryptedEd25519.pem, ''), 'passphrase_required');
  });

  test('when the passphrase is wrong, then it is wrong_passphrase', () => {
    assertKeyError(
      () => parsePrivateKey(encryptedEd25519.pem, 'correct horse battery stapler'),
      'wrong_passphrase',
    );
  });

  test('when the passphrase is right, then it reads the key that the .pub file holds', () => {
    const key = parsePrivateKey(encryptedEd25519.pem, passphrase);
    assert.deepEqual(key.publicKeyBlob, parsePublicKeyLine(encryptedEd25519.publicLine).publicKeyBlob);
    assert.equal(key.comment, 'encrypted@example');
  });

  test('when the key is encrypted with aes256-gcm, then it is unsupported_encryption before any passphrase, and re-encrypting it as told makes it readable', () => {
    assertKeyError(
      () => parsePrivateKey(gcmEd25519.pem),
      'unsupported_encryption',
      /ssh-keygen -p -Z aes256-ctr/,
    );
    assertKeyError(() => parsePrivateKey(gcmEd25519.pem, passphrase), 'unsupported_encryption', /aes256-gcm/);
    const copy = tempFile(gcmEd25519.pem);
    chmodSync(copy, 0o600);
    sshKeygen(['-q', '-p', '-P', passphrase, '-N', passphrase, '-Z', 'aes256-ctr', '-f', copy]);
    const key = parsePrivateKey(readFileSync(copy, 'utf8'), passphrase);
    assert.deepEqual(key.publicKeyBlob, parsePublicKeyLine(gcmEd25519.publicLine).publicKeyBlob);
  });

  for (const cipher of ['aes128-ctr', 'aes192-ctr', 'aes128-cbc', 'aes192-cbc', 'aes256-cbc']) {
    test(`when the key is encrypted with ${cipher}, then the passphrase reads it`, () => {
      const key = generateKey(`cipher-${cipher}`, ['-t', 'ed25519', '-N', 'pass', '-a', '2', '-Z', cipher]);
      assert.equal(
        fingerprint(parsePrivateKey(key.pem, 'pass')),
        fingerprint(parsePublicKeyLine(key.publicLine)),
      );
    });
  }

  test('when the key is encrypted with chacha20-poly1305, then it is unsupported_encryption saying how to re-encrypt', () => {
    const key = generateKey('chacha', [
      '-t',
      'ed25519',
      '-N',
      'pass',
      '-a',
      '2',
      '-Z',
      'chacha20-poly1305@openssh.com',
    ]);
    assertKeyError(() => parsePrivateKey(key.pem, 'pass'), 'unsupported_encryption', /ssh-keygen -p/);
  });

  test('when given an RSA key file, then it is unsupported_key_type naming ssh-rsa', () => {
    assertKeyError(() => parsePrivateKey(rsa.pem), 'unsupported_key_type', /this key is ssh-rsa/);
  });

  test('when given an encrypted RSA key file, then it is unsupported_key_type before any passphrase is asked', () => {
    assertKeyError(() => parsePrivateKey(encryptedRsa.pem), 'unsupported_key_type', /ssh-rsa/);
  });

  test('when given an ECDSA key file, then it is unsupported_key_type naming its type', () => {
    assertKeyError(() => parsePrivateKey(ecdsa.pem), 'unsupported_key_type', /ecdsa-sha2-nistp256/);
  });

  test('when given a PEM "BEGIN RSA PRIVATE KEY" file, then it is malformed_key naming the PEM type', () => {
    assert.match(pemRsa.pem, /BEGIN RSA PRIVATE KEY/);
    assertKeyError(() => parsePrivateKey(pemRsa.pem), 'malformed_key', /RSA PRIVATE KEY/);
    assert.equal(isEncryptedPrivateKey(pemRsa.pem), false);
  });

  test('when given random text, then it is malformed_key', () => {
    assertKeyError(() => parsePrivateKey('not a key at all\n'), 'malformed_key');
    assertKeyError(() => parsePrivateKey(''), 'malformed_key');
    assert.equal(isEncryptedPrivateKey('not a key at all\n'), false);
  });

  test('when given the .pub file instead, then it is malformed_key pointing to the private file', () => {
    assertKeyError(() => parsePrivateKey(ed25519.publicLine), 'malformed_key', /public key/);
  });

  test('when the file is cut short or altered, then it is malformed_key', () => {
    const lines = ed25519.pem.trim().split('\n');
    const cut = [...lines.slice(0, 3), ...lines.slice(-1)].join('\n');
    assertKeyError(() => parsePrivateKey(cut), 'malformed_key');
    const body = lines.slice(1, -1).join('');
    const flipped = `${body.slice(0, 200)}${body[200] === 'A' ? 'B' : 'A'}${body.slice(201)}`;
    const altered = [lines[0], flipped, lines.at(-1)].join('\n');
    assertKeyError(() => parsePrivateKey(altered), 'malformed_key');
  });
});

describe('signSshsig', () => {
  test('when signing, then the output is byte for byte what ssh-keygen -Y sign writes', async () => {
    const ours = await signSshsig(message, parsePrivateKey(ed25519.pem), loginNamespace);
    assert.equal(ours, sshKeygenSign(ed25519, message));
  });

  test('when signed, then ssh-keygen -Y verify accepts it and our verifier too', async () => {
    const armored = await signSshsig(message, parsePrivateKey(ed25519.pem), loginNamespace);
    assert.match(sshKeygenVerify(ed25519, armored, message), /Good "svc-login" signature for dev@example/);
    assert.equal(
      verifySshsig({ armored, message, namespace: loginNamespace, publicKey: ed25519.publicLine }),
      true,
    );
  });

  test('when ssh-keygen -Y verify is asked about another namespace, then it refuses (the harness can fail)', async () => {
    const armored = await signSshsig(message, parsePrivateKey(ed25519.pem), loginNamespace);
    assert.throws(() => sshKeygenVerify(ed25519, armored, message, 'file'));
  });

  test('when signed with the encrypted key and its passphrase, then both verifiers accept it', async () => {
    const armored = await signSshsig(
      message,
      parsePrivateKey(encryptedEd25519.pem, passphrase),
      loginNamespace,
    );
    assert.match(sshKeygenVerify(encryptedEd25519, armored, message), /Good/);
    assert.equal(
      verifySshsig({ armored, message, namespace: loginNamespace, publicKey: encryptedEd25519.publicLine }),
      true,
    );
  });

  test('when the signer answers asynchronously, as an agent would, then the signature is the same', async () => {
    const key = parsePrivateKey(ed25519.pem);
    const agentLike: SshSigner = { publicKeyBlob: key.publicKeyBlob, sign: async (data) => key.sign(data) };
    assert.equal(await signSshsig(message, agentLike, loginNamespace), sshKeygenSign(ed25519, message));
  });

  test('when the signer signs with a key other than the one it names, then signing fails', async () => {
    const other = parsePrivateKey(otherEd25519.pem);
    const impostor: SshSigner = {
      publicKeyBlob: parsePrivateKey(ed25519.pem).publicKeyBlob,
      sign: other.sign.bind(other),
    };
    await assert.rejects(signSshsig(message, impostor, loginNamespace), /does not verify/);
  });

  test('when the signer holds an RSA key, then it is unsupported_key_type', async () => {
    const rsaSigner: SshSigner = {
      publicKeyBlob: Buffer.from(rsa.publicLine.split(' ')[1] ?? '', 'base64'),
      sign: () => Buffer.alloc(0),
    };
    await assert.rejects(signSshsig(message, rsaSigner, loginNamespace), (error: unknown) => {
      assert.ok(error instanceof SshKeyError);
      assert.equal(error.code, 'unsupported_key_type');
      return true;
    });
  });

  test('when the namespace is empty, then signing is refused', async () => {
    await assert.rejects(signSshsig(message, parsePrivateKey(ed25519.pem), ''), TypeError);
  });
});

describe('verifySshsig', () => {
  const byKeygen = sshKeygenSign(ed25519, message);

  test('when ssh-keygen signed the message, then it verifies against the .pub line, the blob or the parsed key', () => {
    const parsed = parsePublicKeyLine(ed25519.publicLine);
    for (const publicKey of [ed25519.publicLine, parsed.publicKeyBlob, parsed]) {
      assert.equal(
        sshsigRefusal({ armored: byKeygen, message, namespace: loginNamespace, publicKey }),
        undefined,
      );
      assert.equal(verifySshsig({ armored: byKeygen, message, namespace: loginNamespace, publicKey }), true);
    }
  });

  test('when the message is given as bytes, then it verifies the same', () => {
    const verification = {
      armored: byKeygen,
      message: Buffer.from(message),
      namespace: loginNamespace,
      publicKey: ed25519.publicLine,
    };
    assert.equal(verifySshsig(verification), true);
  });

  test('when ssh-keygen signed with sha256, then it verifies', () => {
    const armored = sshKeygenSign(ed25519, message, ['-O', 'hashalg=sha256']);
    assert.equal(decodeSshsig(armored).hashAlgorithm.toString(), 'sha256');
    assert.equal(
      verifySshsig({ armored, message, namespace: loginNamespace, publicKey: ed25519.publicLine }),
      true,
    );
  });

  test('when the signature is for another namespace, then it is refused', () => {
    const path = tempFile(message);
    sshKeygen(['-Y', 'sign', '-n', 'file', '-f', ed25519.path, path]);
    assertRefused(readFileSync(`${path}.sig`, 'utf8'), 'namespace_mismatch');
  });

  test('when the message was altered, then it is refused', () => {
    assertRefused(byKeygen, 'bad_signature', { message: message.replace('svc.example', 'evil.example') });
    assertRefused(byKeygen, 'bad_signature', { message: `${message}\n` });
  });

  test('when another key signed, then it is refused', () => {
    assertRefused(sshKeygenSign(otherEd25519, message), 'public_key_mismatch');
  });

  test('when another key signed and the expected key is swapped in, then the signature does not verify', () => {
    const byOther = sshKeygenSign(otherEd25519, message);
    const swapped = alterSshsig(byOther, {
      publicKeyBlob: parsePublicKeyLine(ed25519.publicLine).publicKeyBlob,
    });
    assertRefused(swapped, 'bad_signature');
  });

  test('when the right signature carries another embedded key, then it is refused', () => {
    const swapped = alterSshsig(byKeygen, {
      publicKeyBlob: parsePublicKeyLine(otherEd25519.publicLine).publicKeyBlob,
    });
    assertRefused(swapped, 'public_key_mismatch');
  });

  test('when the armor is cut, garbled, empty or not text, then it is refused without throwing', () => {
    const lines = byKeygen.trim().split('\n');
    assertRefused(lines.slice(0, -1).join('\n'), 'malformed_signature');
    assertRefused([lines[0], lines[1], lines.at(-1)].join('\n'), 'malformed_signature');
    assertRefused(
      byKeygen.replace(/\n(.)/, (_, char: string) => `\n${char === 'U' ? 'V' : 'U'}`),
      'malformed_signature',
    );
    assertRefused(byKeygen.replace('BEGIN SSH SIGNATURE', 'BEGIN SSH SIGNATUR'), 'malformed_signature');
    assertRefused(
      [...lines.slice(0, 2), `!!!!${lines[2]?.slice(4)}`, ...lines.slice(3)].join('\n'),
      'malformed_signature',
    );
    assertRefused('', 'malformed_signature');
    assertRefused(byKeygen.repeat(2), 'malformed_signature');
    assertRefused(byKeygen.repeat(200), 'malformed_signature');
    for (const notText of [undefined, null, 42, {}, [byKeygen], Buffer.from(byKeygen)]) {
      assertRefused(notText, 'malformed_signature');
    }
  });

  test('when a field is out of the format, then it is refused', () => {
    const fields = decodeSshsig(byKeygen);
    assertRefused(alterSshsig(byKeygen, { magic: Buffer.from('SSHSIH') }), 'malformed_signature');
    assertRefused(alterSshsig(byKeygen, { version: 2 }), 'unsupported_version');
    assertRefused(alterSshsig(byKeygen, { reserved: Buffer.from('x') }), 'malformed_signature');
    assertRefused(alterSshsig(byKeygen, { hashAlgorithm: Buffer.from('md5') }), 'unsupported_hash_algorithm');
    assertRefused(alterSshsig(byKeygen, { trailing: Buffer.from([0]) }), 'malformed_signature');
    const rawSignature = fields.signature.subarray(-64);
    assertRefused(
      alterSshsig(byKeygen, { signature: sshBlob('ssh-rsa', rawSignature) }),
      'unsupported_signature_type',
    );
    assertRefused(
      alterSshsig(byKeygen, { signature: sshBlob('ssh-ed25519', rawSignature.subarray(1)) }),
      'bad_signature',
    );
    assertRefused(
      alterSshsig(byKeygen, { signature: Buffer.concat([fields.signature, Buffer.from([0])]) }),
      'bad_signature',
    );
  });

  test('when the expected key is the identity point, then the universal forgery (R = identity, S = 0) is refused', () => {
    const identity = Buffer.alloc(32);
    identity[0] = 1;
    const weakKeyBlob = sshBlob('ssh-ed25519', identity);
    const forged = alterSshsig(byKeygen, {
      publicKeyBlob: weakKeyBlob,
      signature: sshBlob('ssh-ed25519', Buffer.concat([identity, Buffer.alloc(32)])),
    });
    const verification = { armored: forged, message, namespace: loginNamespace, publicKey: weakKeyBlob };
    assert.equal(sshsigRefusal(verification), 'unusable_public_key');
    assert.equal(verifySshsig(verification), false);
  });

  test('when the expected key is not an ed25519 key, then nothing verifies against it', () => {
    for (const publicKey of [rsa.publicLine, 'garbage', Buffer.alloc(32)]) {
      const verification = { armored: byKeygen, message, namespace: loginNamespace, publicKey };
      assert.equal(sshsigRefusal(verification), 'unusable_public_key');
      assert.equal(verifySshsig(verification), false);
    }
  });
});
