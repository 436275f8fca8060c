/**
 * Ed25519 public keys: the line of a `.pub` file, the SSH key blob, fingerprints. sshpk parses
 * blobs and makes fingerprints; what it lacks stays here: the refusal of degenerate keys and a
 * strict check that a blob is exactly what OpenSSH writes.
 */
import { Buffer } from 'node:buffer';
import sshpk from 'sshpk';
import { decodeBase64 } from './armor.ts';
import { createKeyAdvice, malformedKey, showName, unsupportedKeyType } from './key-error.ts';
import { SshWireReader, sshString, WireFormatError } from './wire.ts';

export const ed25519Type = 'ssh-ed25519';
export const ed25519KeyLength = 32;

/** The DER header that turns raw ed25519 bytes into the SPKI form node:crypto imports. */
export const spkiEd25519Prefix = Buffer.from('302a300506032b6570032100', 'hex');

/** A bound well above any ed25519 public key line, so hostile input stays cheap. */
const maxPublicKeyLineLength = 16 * 1024;

/**
 * The encodings, sign bit cleared, of the ed25519 points of small order (libsodium's list): y = 0,
 * 1, ±y of the order-8 points, and p-1, p, p+1. OpenSSL verifies any message under such a key
 * (with R the identity and S = 0), so a key among them is refused rather than registered.
 */
const smallOrderPoints = [
  '0000000000000000000000000000000000000000000000000000000000000000',
  '0100000000000000000000000000000000000000000000000000000000000000',
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05',
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  'edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  'eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
].map((hex) => Buffer.from(hex, 'hex'));

/** An ed25519 public key as read from one line of a `.pub` file. */
export interface SshPublicKey {
  type: 'ssh-ed25519';
  /** The key as the line writes it; `${type} ${keyBase64}` is the line without its comment. */
  keyBase64: string;
  comment: string;
  /** The 32 raw bytes of the ed25519 key. */
  publicKey: Buffer;
  /** The SSH wire encoding the fingerprint hashes and an SSHSIG signature embeds. */
  publicKeyBlob: Buffer;
}

/**
 * Parses one OpenSSH public key line, `ssh-ed25519 AAAA… [comment]`, as a `.pub` file holds it;
 * surrounding whitespace and a final newline are fine. Refuses with SshKeyError `malformed_key`
 * (several lines, authorized_keys options, a cut or garbled key, a key whose inner type disagrees
 * with its type word) or `unsupported_key_type` (a well-formed key of another type).
 */
export function parsePublicKeyLine(line: string): SshPublicKey {
  if (typeof line !== 'string') throw malformedKey('a public key line must be a string');
  if (line.length > maxPublicKeyLineLength) {
    throw malformedKey(
      `the public key line is too long (${line.length} characters); paste one line of a .pub file`,
    );
  }
  const text = line.trim();
  if (text === '') throw malformedKey('the public key line is empty; paste the contents of your .pub file');
  if (text.startsWith('-----BEGIN')) {
    throw malformedKey(
      'this is a PEM block, not a public key line; paste the .pub file (never the private key, keep it secret)',
    );
  }
  if (/[\r\n]/.test(text)) {
    throw malformedKey(
      'the text holds several lines; paste exactly one public key, the one line of a .pub file',
    );
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused here.
  if (/[\0-\x08\x0b-\x1f\x7f]/.test(text)) throw malformedKey('the public key line holds control characters');

  const words = text.split(/[ \t]+/);
  const keyAt = words.findIndex((word, index) => blobTypeMatches(word, words[index + 1]));
  if (keyAt > 0) {
    throw malformedKey(
      'the line starts with options before the key type, as in authorized_keys; ' +
        'paste only "<type> <key> [comment]", the line of the .pub file',
    );
  }
  const [typeWord = '', keyBase64] = words;
  if (keyAt < 0 || keyBase64 === undefined) throw malformedKey(describeBadKey(typeWord, keyBase64));
  if (typeWord !== ed25519Type) throw unsupportedKeyType(typeWord);

  const publicKeyBlob = decodeBase64(keyBase64) ?? Buffer.alloc(0);
  const publicKey = readEd25519PublicKeyBlob(publicKeyBlob);
  if (publicKey === undefined) throw malformedKey('the ssh-ed25519 key is cut short or has extra bytes');
  if (isSmallOrderPoint(publicKey)) {
    throw malformedKey(`the ssh-ed25519 key is a degenerate point anyone could sign for; ${createKeyAdvice}`);
  }
  // The comment keeps its inner spacing: it is everything after the key.
  const comment = text.slice(typeWord.length).trimStart().slice(keyBase64.length).trim();
  return { type: ed25519Type, keyBase64, comment, publicKey, publicKeyBlob };
}

/** `SHA256:<base64 without padding>` of the public key blob, exactly as `ssh-keygen -l` prints it. */
export function fingerprint(key: Uint8Array | { readonly publicKeyBlob: Uint8Array }): string {
  const blob = key instanceof Uint8Array ? key : key.publicKeyBlob;
  return sshpk.parseKey(Buffer.from(blob), 'rfc4253').fingerprint('sha256').toString();
}

/** The `.pub` line of a key, `ssh-ed25519 AAAA… [comment]`, e.g. to register a key read from its private file. */
export function formatPublicKeyLine(key: {
  readonly publicKeyBlob: Uint8Array;
  readonly comment?: string;
}): string {
  const line = `${ed25519Type} ${Buffer.from(key.publicKeyBlob).toString('base64')}`;
  const comment = key.comment?.trim();
  return comment ? `${line} ${comment}` : line;
}

/** The 32 raw bytes of an ssh-ed25519 public key blob, as sshpk reads it, or undefined for any other blob. */
export function readEd25519PublicKeyBlob(blob: unknown): Buffer | undefined {
  if (!(blob instanceof Uint8Array)) return undefined;
  const bytes = Buffer.from(blob);
  let key: sshpk.Key;
  try {
    key = sshpk.parseKey(bytes, 'rfc4253');
  } catch {
    return undefined;
  }
  if (key.type !== 'ed25519' || keyPart(key, 'k') !== undefined) return undefined;
  const point = keyPart(key, 'A');
  // sshpk pads a short point to 32 bytes; only the blob OpenSSH itself would write is taken.
  if (point?.length !== ed25519KeyLength || !key.toBuffer('rfc4253').equals(bytes)) return undefined;
  return Buffer.from(point);
}

/** The type string a key or signature blob starts with, or undefined when there is none. */
export function readBlobType(blob: unknown): string | undefined {
  if (!(blob instanceof Uint8Array)) return undefined;
  try {
    return new SshWireReader(Buffer.from(blob)).readString().toString('latin1');
  } catch (error) {
    if (error instanceof WireFormatError) return undefined;
    throw error;
  }
}

export function ed25519PublicKeyBlob(publicKey: Buffer): Buffer {
  return Buffer.concat([sshString(ed25519Type), sshString(publicKey)]);
}

export function isSmallOrderPoint(publicKey: Buffer): boolean {
  const y = Buffer.from(publicKey);
  y[31] = (y[31] ?? 0) & 0x7f;
  return smallOrderPoints.some((point) => point.equals(y));
}

/** One named part of an sshpk key (an ed25519 key has `A`, the public point, and `k`, the seed). */
export function keyPart(key: sshpk.Key | sshpk.PrivateKey, name: string): Buffer | undefined {
  return key.parts.find((part) => part.name === name)?.data;
}

/** Whether `word` is a type word followed by a base64 key blob of that same type. */
function blobTypeMatches(word: string, next: string | undefined): boolean {
  const blob = next === undefined ? undefined : decodeBase64(next);
  return blob !== undefined && readBlobType(blob) === word;
}

function describeBadKey(typeWord: string, keyBase64: string | undefined): string {
  if (keyBase64 === undefined) {
    return `the line has no key after ${showName(typeWord)}; a public key line reads "ssh-ed25519 AAAA… comment"`;
  }
  const blob = decodeBase64(keyBase64);
  if (blob === undefined) {
    return `the key after ${showName(typeWord)} is not valid base64 (was it cut short or wrapped when copied?)`;
  }
  const innerType = readBlobType(blob);
  if (innerType === undefined) return 'the base64 after the type word is not an SSH public key';
  return `the key inside is ${showName(innerType)} but the line says ${showName(typeWord)}; the line was altered`;
}
