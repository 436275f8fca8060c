/**
 * SSHSIG signatures (OpenSSH's PROTOCOL.sshsig) for `svc login`: signing a challenge as
 * `ssh-keygen -Y sign` does, byte for byte, and verifying one strictly.
 */
import { Buffer } from 'node:buffer';
import { createHash, createPublicKey, verify } from 'node:crypto';
import { armor, dearmor } from './armor.ts';
import { malformedKey, unsupportedKeyType } from './key-error.ts';
import {
  ed25519Type,
  isSmallOrderPoint,
  parsePublicKeyLine,
  readBlobType,
  readEd25519PublicKeyBlob,
  spkiEd25519Prefix,
} from './public-key.ts';
import { SshWireReader, sshString, uint32, WireFormatError } from './wire.ts';

/** The SSHSIG namespace of `svc login` challenges: a signature made for another purpose never signs in. */
export const loginNamespace = 'svc-login';

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

/**
 * Whatever can sign with an ed25519 key: a key file read by parsePrivateKey, or ssh-agent.
 * `sign` returns the SSH signature blob (string "ssh-ed25519", string signature), which is what
 * an agent answers, so an agent signer passes its answer through unchanged.
 */
export interface SshSigner {
  readonly publicKeyBlob: Buffer;
  sign(data: Buffer): Buffer | Promise<Buffer>;
}

export interface SshsigVerification {
  /** The armored signature as received; anything, since it comes from the network. */
  armored: unknown;
  message: string | Uint8Array;
  namespace: string;
  /** The key expected to have signed: a public key line, a public key blob, or a parsed key. */
  publicKey: string | Uint8Array | { readonly publicKeyBlob: Uint8Array };
}

const ed25519SignatureLength = 64;

/** A bound well above any ed25519 signature, so hostile input stays cheap. */
const maxArmoredSignatureLength = 16 * 1024;

const sshsigMagic = Buffer.from('SSHSIG', 'latin1');
const sshsigVersion = 1;
const sshsigLabel = 'SSH SIGNATURE';
const sshsigHashAlgorithms: ReadonlySet<string> = new Set<SshsigHashAlgorithm>(['sha256', 'sha512']);
/** The hash ssh-keygen -Y sign uses. */
const signingHashAlgorithm: SshsigHashAlgorithm = 'sha512';

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
