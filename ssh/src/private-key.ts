/**
 * OpenSSH private key files (`-----BEGIN OPENSSH PRIVATE KEY-----`): what the file says of itself,
 * read before any passphrase so a key is refused clearly, then the key read and decrypted by sshpk
 * and signing with node:crypto. AES-GCM and chacha20-poly1305 files are refused with the command
 * that re-encrypts them (docs/adr/0008-ssh-code-in-its-own-workspace.md).
 */
import { Buffer } from 'node:buffer';
import { createPrivateKey, createPublicKey, type KeyObject, sign } from 'node:crypto';
import sshpk from 'sshpk';
import { dearmor } from './armor.ts';
import { createKeyAdvice, malformedKey, SshKeyError, showName, unsupportedKeyType } from './key-error.ts';
import {
  ed25519KeyLength,
  ed25519PublicKeyBlob,
  ed25519Type,
  keyPart,
  readBlobType,
  readEd25519PublicKeyBlob,
  spkiEd25519Prefix,
} from './public-key.ts';
import type { SshSigner } from './sshsig.ts';
import { SshWireReader, sshString, WireFormatError } from './wire.ts';

/** An ed25519 key read from an OpenSSH private key file; the private half stays inside `sign`. */
export interface SshPrivateKey extends SshSigner {
  readonly type: 'ssh-ed25519';
  readonly publicKey: Buffer;
  readonly comment: string;
  sign(data: Buffer): Buffer;
}

/** A bound well above any ed25519 key file, so hostile input stays cheap. */
const maxPrivateKeyFileLength = 64 * 1024;

const privateKeyLabel = 'OPENSSH PRIVATE KEY';
const privateKeyMagic = Buffer.from('openssh-key-v1\0', 'latin1');

/** The DER header that turns a raw ed25519 seed into the PKCS#8 form node:crypto imports. */
const pkcs8Ed25519Prefix = Buffer.from('302e020100300506032b657004220420', 'hex');

/**
 * The key-file ciphers sshpk decrypts: the AES modes ssh-keygen -Z offers whose key file is the
 * plain openssh-key-v1 layout (AES-GCM appends a tag sshpk does not read; chacha20-poly1305 is
 * OpenSSH's own).
 */
const keyFileCiphers: ReadonlySet<string> = new Set([
  'aes128-ctr',
  'aes192-ctr',
  'aes256-ctr',
  'aes128-cbc',
  'aes192-cbc',
  'aes256-cbc',
]);

/**
 * Whether the text is an OpenSSH private key file whose private part is encrypted; false for
 * anything else, about which parsePrivateKey says more. An encrypted key of an unsupported type
 * is refused without a passphrase, so callers should try parsePrivateKey first and prompt only
 * on `passphrase_required`.
 */
export function isEncryptedPrivateKey(pem: string): boolean {
  try {
    return readPrivateKeyFile(pem).cipherName !== 'none';
  } catch {
    return false;
  }
}

/**
 * Reads an OpenSSH private key file (`-----BEGIN OPENSSH PRIVATE KEY-----`, as ssh-keygen writes
 * it), unencrypted or encrypted with a bcrypt-derived AES key. The key type is checked before the
 * passphrase, so an RSA key is `unsupported_key_type` whether or not it is encrypted.
 */
export function parsePrivateKey(pem: string, passphrase?: string): SshPrivateKey {
  const file = readPrivateKeyFile(pem);
  const publicKey = readEd25519PublicKeyBlob(file.publicKeyBlob);
  if (publicKey === undefined) {
    const type = readBlobType(file.publicKeyBlob);
    if (type !== undefined && type !== ed25519Type) throw unsupportedKeyType(type);
    throw malformedKey('the public key in the private key file is cut short or has extra bytes');
  }
  if (file.cipherName !== 'none') checkEncryption(file, passphrase);
  const key = readWithSshpk(pem, file.cipherName === 'none' ? undefined : passphrase);
  return ed25519FileKey(key, publicKey);
}

interface PrivateKeyFile {
  cipherName: string;
  kdfName: string;
  kdfOptions: Buffer;
  publicKeyBlob: Buffer;
}

/** What the file says of itself before its private part: enough to refuse it clearly before decrypting. */
function readPrivateKeyFile(pem: string): PrivateKeyFile {
  if (typeof pem !== 'string') throw malformedKey('a private key file must be read as text');
  if (pem.length > maxPrivateKeyFileLength) {
    throw malformedKey(`the file is too large (${pem.length} characters) for an OpenSSH ed25519 private key`);
  }
  const bytes = dearmor(pem, privateKeyLabel);
  if (bytes === undefined) throw malformedKey(describeNotPrivateKey(pem));
  try {
    const reader = new SshWireReader(bytes);
    if (!reader.readBytes(privateKeyMagic.length).equals(privateKeyMagic)) {
      throw malformedKey('the file is not in the openssh-key-v1 format');
    }
    const cipherName = reader.readString().toString('latin1');
    const kdfName = reader.readString().toString('latin1');
    const kdfOptions = reader.readString();
    const keyCount = reader.readUint32();
    if (keyCount !== 1) {
      throw malformedKey(`the file holds ${keyCount} keys; svc reads files with exactly one`);
    }
    const publicKeyBlob = reader.readString();
    reader.readString(); // the private part, which sshpk reads
    return { cipherName, kdfName, kdfOptions, publicKeyBlob };
  } catch (error) {
    if (error instanceof WireFormatError) {
      throw malformedKey('the OpenSSH private key is cut short or damaged');
    }
    throw error;
  }
}

function describeNotPrivateKey(text: string): string {
  const label = /-----BEGIN ([A-Z0-9 ]{1,40})-----/.exec(text)?.[1];
  if (label === privateKeyLabel) {
    return 'the OpenSSH private key is damaged: its base64 or armor lines are broken';
  }
  if (label !== undefined) {
    return (
      `this is a PEM "${label}" file, not an OpenSSH private key; ` +
      `svc needs an ed25519 key in OpenSSH format: ${createKeyAdvice}`
    );
  }
  if (/^\s*(ssh-|ecdsa-|sk-)\S+\s+AAAA/.test(text)) {
    return 'this is a public key; give the private key file, the one without .pub';
  }
  return `not an OpenSSH private key (no "-----BEGIN ${privateKeyLabel}-----" line)`;
}

/** Refuses, before any decryption, an encryption sshpk cannot read or a missing passphrase. */
function checkEncryption(file: PrivateKeyFile, passphrase: string | undefined): void {
  if (!keyFileCiphers.has(file.cipherName) || file.kdfName !== 'bcrypt') {
    throw new SshKeyError(
      'unsupported_encryption',
      `this key is encrypted with ${showName(file.cipherName)} (key derivation ${showName(file.kdfName)}); ` +
        'svc reads AES-CTR and AES-CBC with bcrypt, as ssh-keygen writes by default: ' +
        're-encrypt it with ssh-keygen -p -Z aes256-ctr -f <key file>',
    );
  }
  // An empty passphrase cannot have encrypted the key: bcrypt_pbkdf refuses one.
  if (passphrase === undefined || passphrase === '') {
    throw new SshKeyError('passphrase_required', 'this key is encrypted: give its passphrase');
  }
  if (typeof passphrase !== 'string') throw new TypeError('the passphrase must be a string');
}

/**
 * The key, read and (with a passphrase) decrypted by sshpk. sshpk tells a wrong passphrase by the
 * check-ints that open the private part; anything else it refuses is a damaged file.
 */
function readWithSshpk(pem: string, passphrase: string | undefined): sshpk.PrivateKey {
  try {
    return sshpk.parsePrivateKey(pem, 'openssh', passphrase === undefined ? {} : { passphrase });
  } catch (error) {
    if (error instanceof Error && /incorrect passphrase/i.test(error.message)) throw wrongPassphrase();
    throw malformedKey('the OpenSSH private key is cut short or damaged');
  }
}

/** The ed25519 key sshpk read, checked against the public key the file names, ready to sign with node:crypto. */
function ed25519FileKey(key: sshpk.PrivateKey, publicKey: Buffer): SshPrivateKey {
  const seed = key.type === 'ed25519' ? keyPart(key, 'k') : undefined;
  if (seed === undefined || seed.length !== ed25519KeyLength) {
    throw malformedKey('the private key in the file is not of the type of its public key');
  }
  const der = Buffer.concat([pkcs8Ed25519Prefix, seed]);
  const privateKey = createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
  der.fill(0);
  const derivedPublicKey = createPublicKey(privateKey)
    .export({ format: 'der', type: 'spki' })
    .subarray(spkiEd25519Prefix.length);
  if (!derivedPublicKey.equals(publicKey) || !keyPart(key, 'A')?.equals(publicKey)) {
    throw malformedKey('the private key in the file does not match its public key');
  }
  return new Ed25519FileKey(privateKey, publicKey, key.comment ?? '');
}

class Ed25519FileKey implements SshPrivateKey {
  readonly type = ed25519Type;
  readonly publicKey: Buffer;
  readonly publicKeyBlob: Buffer;
  readonly comment: string;
  readonly #privateKey: KeyObject;

  constructor(privateKey: KeyObject, publicKey: Buffer, comment: string) {
    this.#privateKey = privateKey;
    this.publicKey = publicKey;
    this.publicKeyBlob = ed25519PublicKeyBlob(publicKey);
    this.comment = comment;
  }

  sign(data: Buffer): Buffer {
    return Buffer.concat([sshString(ed25519Type), sshString(sign(null, data, this.#privateKey))]);
  }
}

function wrongPassphrase(): SshKeyError {
  return new SshKeyError('wrong_passphrase', 'the passphrase does not decrypt this key');
}
