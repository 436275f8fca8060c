/** @svc/ssh: ed25519 SSH keys and SSHSIG signatures for `svc login`, one list of exports. */
export type { SshKeyErrorCode } from './key-error.ts';
export { SshKeyError, sshKeyErrorCodes } from './key-error.ts';
export type { SshPrivateKey } from './private-key.ts';
export { isEncryptedPrivateKey, parsePrivateKey } from './private-key.ts';
export type { SshPublicKey } from './public-key.ts';
export { fingerprint, formatPublicKeyLine, parsePublicKeyLine } from './public-key.ts';
export type { SshSigner, SshsigHashAlgorithm, SshsigRefusal, SshsigVerification } from './sshsig.ts';
export { loginNamespace, signSshsig, sshsigRefusal, sshsigRefusals, verifySshsig } from './sshsig.ts';
export { SshWireReader, sshString, uint32, WireFormatError } from './wire.ts';
