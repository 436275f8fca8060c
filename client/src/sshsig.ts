/**
 * Ed25519 SSH keys and SSHSIG signatures for `svc login`: public key lines, OpenSSH private key
 * files, signing, verifying. sshpk parses keys, decrypts key files and makes fingerprints; what it
 * lacks stays here: the SSHSIG envelope and its armor, the refusal of degenerate keys, and the
 * error codes and messages a user sees.
 */
import { Buffer } from 'node:buffer';
import { createHash, createPrivateKey, createPublicKey, type KeyObject, sign, verify } from 'node:crypto';
import sshpk from 'sshpk';
import { SshWireReader, sshString, uint32, WireFormatError } from './ssh-wire.ts';

/** The SSHSIG namespace of `svc login` challenges: a signature made for another purpose never signs in. */
export const loginNamespace = 'svc-login';

/** Why a key was refused; the server answers each with 422 and this as its `code`. */
export const sshKeyErrorCodes = [
  'malformed_key',
  'unsupported_key_type',
  'passphrase_required',
  'wrong_passphrase',
  'unsupported_encryption',
] as const;

export type SshKeyErrorCode = (typeof sshKeyErrorCodes)[number];

/** Why a signature was refused. The server answers all alike, so these are for its logs and for tests. */
export const sshsigRefusals = [
  'malformed_signature',
  'unsupported_version',
  'namespace_mismatch',
  'unsupported_hash_algorithm',
  'public_key_mismatch',
  'unsupported_signature_type',
  'bad_signature',
  'unusable_public_key',
] as const;

export type SshsigRefusal = (typeof sshsigRefusals)[number];

export type SshsigHashAlgorithm = 'sha256' | 'sha512';

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
 * Whatever can sign with an ed25519 key: a key file read by parsePrivateKey, or later ssh-agent.
 * `sign` returns the SSH signature blob (string "ssh-ed25519", string signature), which is what
 * an agent answers, so an agent signer passes its answer through unchanged.
 */
export interface SshSigner {
  readonly publicKeyBlob: Buffer;
  sign(data: Buffer): Buffer | Promise<Buffer>;
}

/** An ed25519 key read from an OpenSSH private key file; the private half stays inside `sign`. */
export interface SshPrivateKey extends SshSigner {
  readonly type: 'ssh-ed25519';
  readonly publicKey: Buffer;
  readonly comment: string;
  sign(data: Buffer): Buffer;
}

export interface SshsigVerification {
  /** The armored signature as received; anything, since it comes from the network. */
  armored: unknown;
  message: string | Uint8Array;
  namespace: string;
  /** The key expected to have signed: a public key line, a public key blob, or a parsed key. */
  publicKey: string | Uint8Array | { readonly publicKeyBlob: Uint8Array };
}

/** A key that was refused; `code` says why and the message says what to do. */
export class SshKeyError extends Error {
  override readonly name = 'SshKeyError';
  readonly code: SshKeyErrorCode;
  /** For `unsupported_key_type`: the type the key has (`ssh-rsa`), when it is a printable name. */
  readonly keyType: string | undefined;

  constructor(code: SshKeyErrorCode, message: string, keyType?: string) {
    super(message);
    this.code = code;
    this.keyType = keyType;
  }
}

const ed25519Type = 'ssh-ed25519';
const ed25519KeyLength = 32;
const ed25519SignatureLength = 64;

/** Bounds on input sizes, well above any ed25519 key or signature, so hostile input stays cheap. */
const maxPublicKeyLineLength = 16 * 1024;
const maxPrivateKeyFileLength = 64 * 1024;
const maxArmoredSignatureLength = 16 * 1024;

const sshsigMagic = Buffer.from('SSHSIG', 'latin1');
const sshsigVersion = 1;
const sshsigLabel = 'SSH SIGNATURE';
const sshsigHashAlgorithms: ReadonlySet<string> = new Set<SshsigHashAlgorithm>(['sha256', 'sha512']);
/** The hash ssh-keygen -Y sign uses. */
const signingHashAlgorithm: SshsigHashAlgorithm = 'sha512';
/** ssh-keygen wraps armored base64 at 70 columns; the same width makes our output byte-identical. */
const armorLineWidth = 70;

const privateKeyLabel = 'OPENSSH PRIVATE KEY';
const privateKeyMagic = Buffer.from('openssh-key-v1\0', 'latin1');

/** DER headers that turn raw ed25519 bytes into the SPKI and PKCS#8 forms node:crypto imports. */
const spkiEd25519Prefix = Buffer.from('302a300506032b6570032100', 'hex');
const pkcs8Ed25519Prefix = Buffer.from('302e020100300506032b657004220420', 'hex');

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

const createKeyAdvice = 'create one with: ssh-keygen -t ed25519';

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

/**
 * Signs `message` as `ssh-keygen -Y sign -n <namespace>` does (SHA-512), giving the armored
 * `-----BEGIN SSH SIGNATURE-----` text byte for byte as ssh-keygen writes it to the `.sig` file.
 * The signer's answer is verified before it is returned, so a signer that holds another key
 * (an agent, say) fails here rather than at the server.
 */
export async function signSshsig(
  message: string | Uint8Array,
  signer: SshSigner,
  namespace: string,
): Promise<string> {
  if (typeof namespace !== 'string' || namespace === '') {
    throw new TypeError(`the SSHSIG namespace must be a non-empty string, such as ${loginNamespace}`);
  }
  const publicKey = readEd25519PublicKeyBlob(signer.publicKeyBlob);
  if (publicKey === undefined) {
    const type = readBlobType(signer.publicKeyBlob);
    if (type !== undefined && type !== ed25519Type) throw unsupportedKeyType(type);
    throw malformedKey("the signer's public key blob is not an ssh-ed25519 key");
  }
  const namespaceBytes = Buffer.from(namespace, 'utf8');
  const signedData = sshsigSignedData(namespaceBytes, signingHashAlgorithm, message);
  const signature = await signer.sign(signedData);
  if (!verifyEd25519SignatureBlob(publicKey, signedData, signature)) {
    throw new Error('the signer answered with a signature that does not verify under its own public key');
  }
  const blob = Buffer.concat([
    sshsigMagic,
    uint32(sshsigVersion),
    sshString(signer.publicKeyBlob),
    sshString(namespaceBytes),
    sshString(Buffer.alloc(0)),
    sshString(signingHashAlgorithm),
    sshString(signature),
  ]);
  return armor(blob, sshsigLabel);
}

/** Whether `armored` is a valid SSHSIG signature of `message` in `namespace` by `publicKey`; never throws. */
export function verifySshsig(verification: SshsigVerification): boolean {
  return sshsigRefusal(verification) === undefined;
}

/**
 * Why the signature is refused, or undefined when it verifies. Strict where OpenSSH is lenient:
 * the reserved field must be empty and nothing may follow the signature, since no signer writes
 * either. Never throws: whatever the input, a refusal comes back.
 */
export function sshsigRefusal(verification: SshsigVerification): SshsigRefusal | undefined {
  try {
    return refuseSshsig(verification);
  } catch {
    return 'malformed_signature';
  }
}

function refuseSshsig({
  armored,
  message,
  namespace,
  publicKey,
}: SshsigVerification): SshsigRefusal | undefined {
  const expectedBlob = expectedPublicKeyBlob(publicKey);
  const expectedKey = expectedBlob && readEd25519PublicKeyBlob(expectedBlob);
  if (expectedBlob === undefined || expectedKey === undefined || isSmallOrderPoint(expectedKey)) {
    return 'unusable_public_key';
  }
  if (typeof armored !== 'string' || armored.length > maxArmoredSignatureLength) return 'malformed_signature';
  const blob = dearmor(armored, sshsigLabel);
  if (blob === undefined) return 'malformed_signature';

  let fields: {
    embeddedKey: Buffer;
    namespace: Buffer;
    reserved: Buffer;
    hashAlgorithm: string;
    signature: Buffer;
  };
  try {
    const reader = new SshWireReader(blob);
    if (!reader.readBytes(sshsigMagic.length).equals(sshsigMagic)) return 'malformed_signature';
    if (reader.readUint32() !== sshsigVersion) return 'unsupported_version';
    fields = {
      embeddedKey: reader.readString(),
      namespace: reader.readString(),
      reserved: reader.readString(),
      hashAlgorithm: reader.readString().toString('latin1'),
      signature: reader.readString(),
    };
    reader.expectEnd();
  } catch (error) {
    if (error instanceof WireFormatError) return 'malformed_signature';
    throw error;
  }
  if (fields.reserved.length !== 0) return 'malformed_signature';
  if (typeof namespace !== 'string' || !fields.namespace.equals(Buffer.from(namespace, 'utf8'))) {
    return 'namespace_mismatch';
  }
  if (!sshsigHashAlgorithms.has(fields.hashAlgorithm)) return 'unsupported_hash_algorithm';
  if (!fields.embeddedKey.equals(expectedBlob)) return 'public_key_mismatch';
  if (readBlobType(fields.signature) !== ed25519Type) return 'unsupported_signature_type';

  const signedData = sshsigSignedData(fields.namespace, fields.hashAlgorithm as SshsigHashAlgorithm, message);
  return verifyEd25519SignatureBlob(expectedKey, signedData, fields.signature) ? undefined : 'bad_signature';
}

function expectedPublicKeyBlob(publicKey: SshsigVerification['publicKey']): Buffer | undefined {
  if (typeof publicKey === 'string') {
    try {
      return parsePublicKeyLine(publicKey).publicKeyBlob;
    } catch {
      return undefined;
    }
  }
  if (publicKey instanceof Uint8Array) return Buffer.from(publicKey);
  const blob = publicKey?.publicKeyBlob;
  return blob instanceof Uint8Array ? Buffer.from(blob) : undefined;
}

/**
 * What ed25519 signs (PROTOCOL.sshsig). The reserved field is always empty here, as OpenSSH
 * builds it; only the magic, the namespace and the message hash make a signature specific.
 */
function sshsigSignedData(
  namespace: Buffer,
  hashAlgorithm: SshsigHashAlgorithm,
  message: string | Uint8Array,
): Buffer {
  const bytes = typeof message === 'string' ? Buffer.from(message, 'utf8') : message;
  return Buffer.concat([
    sshsigMagic,
    sshString(namespace),
    sshString(Buffer.alloc(0)),
    sshString(hashAlgorithm),
    sshString(createHash(hashAlgorithm).update(bytes).digest()),
  ]);
}

/** Checks a signature blob (string "ssh-ed25519", string signature) against a raw ed25519 key. */
function verifyEd25519SignatureBlob(publicKey: Buffer, data: Buffer, signatureBlob: Uint8Array): boolean {
  if (!(signatureBlob instanceof Uint8Array)) return false;
  let signature: Buffer;
  try {
    const reader = new SshWireReader(Buffer.from(signatureBlob));
    if (reader.readString().toString('latin1') !== ed25519Type) return false;
    signature = reader.readString();
    reader.expectEnd();
  } catch (error) {
    if (error instanceof WireFormatError) return false;
    throw error;
  }
  if (signature.length !== ed25519SignatureLength) return false;
  try {
    const key = createPublicKey({
      key: Buffer.concat([spkiEd25519Prefix, publicKey]),
      format: 'der',
      type: 'spki',
    });
    return verify(null, data, key, signature);
  } catch {
    // Node may refuse to import 32 bytes that are not a curve point instead of answering false.
    return false;
  }
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

/** One named part of an sshpk key (an ed25519 key has `A`, the public point, and `k`, the seed). */
function keyPart(key: sshpk.Key | sshpk.PrivateKey, name: string): Buffer | undefined {
  return key.parts.find((part) => part.name === name)?.data;
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

/** The 32 raw bytes of an ssh-ed25519 public key blob, as sshpk reads it, or undefined for any other blob. */
function readEd25519PublicKeyBlob(blob: unknown): Buffer | undefined {
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
function readBlobType(blob: unknown): string | undefined {
  if (!(blob instanceof Uint8Array)) return undefined;
  try {
    return new SshWireReader(Buffer.from(blob)).readString().toString('latin1');
  } catch (error) {
    if (error instanceof WireFormatError) return undefined;
    throw error;
  }
}

function ed25519PublicKeyBlob(publicKey: Buffer): Buffer {
  return Buffer.concat([sshString(ed25519Type), sshString(publicKey)]);
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

/** Base64 as OpenSSH writes it; anything Buffer.from would tolerate but not write back is refused. */
function decodeBase64(text: string): Buffer | undefined {
  if (text.length === 0 || text.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(text)) return undefined;
  const bytes = Buffer.from(text, 'base64');
  return bytes.toString('base64') === text ? bytes : undefined;
}

/** The bytes between `-----BEGIN <label>-----` and `-----END <label>-----`, the whole text but for whitespace. */
function dearmor(text: string, label: string): Buffer | undefined {
  const lines = text.trim().split(/\r?\n/);
  if (
    lines.length < 3 ||
    lines[0] !== `-----BEGIN ${label}-----` ||
    lines.at(-1) !== `-----END ${label}-----`
  ) {
    return undefined;
  }
  return decodeBase64(
    lines
      .slice(1, -1)
      .map((line) => line.trim())
      .join(''),
  );
}

function armor(bytes: Buffer, label: string): string {
  const base64 = bytes.toString('base64');
  const lines = [`-----BEGIN ${label}-----`];
  for (let start = 0; start < base64.length; start += armorLineWidth) {
    lines.push(base64.slice(start, start + armorLineWidth));
  }
  lines.push(`-----END ${label}-----`, '');
  return lines.join('\n');
}

function isSmallOrderPoint(publicKey: Buffer): boolean {
  const y = Buffer.from(publicKey);
  y[31] = (y[31] ?? 0) & 0x7f;
  return smallOrderPoints.some((point) => point.equals(y));
}

function malformedKey(problem: string): SshKeyError {
  return new SshKeyError('malformed_key', problem);
}

function wrongPassphrase(): SshKeyError {
  return new SshKeyError('wrong_passphrase', 'the passphrase does not decrypt this key');
}

function unsupportedKeyType(type: string): SshKeyError {
  return new SshKeyError(
    'unsupported_key_type',
    `only ssh-ed25519 keys are supported; this key is ${showName(type)}: ${createKeyAdvice}`,
    printableName.test(type) ? type : undefined,
  );
}

/** A key type or cipher name for a message; names come from untrusted bytes, so odd ones are not echoed. */
const printableName = /^[A-Za-z0-9@._+-]{1,64}$/;

function showName(name: string): string {
  return printableName.test(name) ? name : 'an unrecognized name';
}
