/** The refusal of a key, public or private: its codes, and the messages that say what to do. */

/** Why a key was refused; the server answers each with 422 and this as its `code`. */
export const sshKeyErrorCodes = [
  'malformed_key',
  'unsupported_key_type',
  'passphrase_required',
  'wrong_passphrase',
  'unsupported_encryption',
] as const;

export type SshKeyErrorCode = (typeof sshKeyErrorCodes)[number];

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

export const createKeyAdvice = 'create one with: ssh-keygen -t ed25519';

export function malformedKey(problem: string): SshKeyError {
  return new SshKeyError('malformed_key', problem);
}

export function unsupportedKeyType(type: string): SshKeyError {
  return new SshKeyError(
    'unsupported_key_type',
    `only ssh-ed25519 keys are supported; this key is ${showName(type)}: ${createKeyAdvice}`,
    printableName.test(type) ? type : undefined,
  );
}

/** A key type or cipher name for a message; names come from untrusted bytes, so odd ones are not echoed. */
const printableName = /^[A-Za-z0-9@._+-]{1,64}$/;

export function showName(name: string): string {
  return printableName.test(name) ? name : 'an unrecognized name';
}
