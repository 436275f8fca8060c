/**
 * Which SSH key signs the sign-in challenge: ssh-agent's, when it holds the key the `.pub` beside
 * the key file names (no private key is read then), else the key file itself, asking for its
 * passphrase on a terminal.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parsePrivateKey, parsePublicKeyLine, SshKeyError, type SshSigner } from '@svc/ssh';
import type { SvcContext } from './context.ts';
import { CliError, ExitCode } from './errors.ts';
import { canPrompt, promptHidden } from './prompt.ts';
import { agentSigner } from './ssh-agent.ts';

export interface LoginOptions {
  keyPath: string | undefined;
  passphrase: string | undefined;
}

/**
 * Where a first key gets registered: the service's web console (SSH keys), since `svc` cannot sign
 * in before a key exists. `apiUrl`, when known, makes it a link to that page.
 */
export function registerHint(keyPath: string, apiUrl?: string): string {
  const page = apiUrl ? `${apiUrl}/console/keys` : '/console/keys on the service';
  return `add ${keyPath}.pub in the service's web console (${page}: paste the .pub file)`;
}

export function defaultKeyPath(home: string): string {
  return join(home, '.ssh', 'id_ed25519');
}

export function expandHome(path: string, home: string): string {
  return path === '~' || path.startsWith('~/') ? join(home, path.slice(1)) : path;
}

export interface KeySigner {
  signer: SshSigner;
  publicKeyBlob: Buffer;
  via: 'ssh-agent' | 'key file';
}

function keyFileProblem(
  error: SshKeyError,
  keyPath: string,
  options: LoginOptions,
  context: SvcContext,
): CliError {
  switch (error.code) {
    case 'passphrase_required': {
      // Enter pressed at the prompt, or --passphrase '': a passphrase was asked for and none came.
      if (options.passphrase === '') {
        return new CliError(
          `the key ${keyPath} is protected by a passphrase, and an empty one was given: type its passphrase.`,
        );
      }
      // svc uses the agent only when it can tell which key to ask for, from the .pub beside the key.
      const agentHint =
        context.env.SSH_AUTH_SOCK && !existsSync(`${keyPath}.pub`)
          ? `or, if ssh-agent holds the key, put its public key beside it (ssh-keygen -y -f ${keyPath} > ${keyPath}.pub): svc asks the agent only for the key that .pub names`
          : `or load the key into ssh-agent (ssh-add ${keyPath})`;
      return new CliError(
        `the key ${keyPath} is protected by a passphrase and there is no terminal to ask for it: ` +
          `pass --passphrase, ${agentHint}.`,
      );
    }
    case 'wrong_passphrase':
      return new CliError(`the passphrase for ${keyPath} is not right.`);
    case 'unsupported_key_type':
      return new CliError(
        `${keyPath} is ${error.keyType ? `an ${error.keyType} key` : 'not an ed25519 key'}, and svc signs in with ed25519 keys only: ` +
          'make one with ssh-keygen -t ed25519, and pass it with --key.',
      );
    default:
      return new CliError(`${keyPath} is not a usable OpenSSH private key: ${error.message}`);
  }
}

async function readKeyFile(keyPath: string, options: LoginOptions, context: SvcContext): Promise<KeySigner> {
  const found = statSync(keyPath, { throwIfNoEntry: false });
  if (found?.isDirectory()) {
    throw new CliError(
      `${keyPath} is a folder: pass the private key file in it, such as --key ${join(keyPath, 'id_ed25519')}.`,
      ExitCode.usage,
    );
  }
  if (!found) {
    throw new CliError(
      `there is no SSH key at ${keyPath}. Make one with:\n` +
        `  mkdir -p -m 700 ${dirname(keyPath)} && ssh-keygen -t ed25519 -f ${keyPath}\n` +
        `then ${registerHint(keyPath)}; or pass --key <path> to use another key.`,
    );
  }
  const pem = readFileSync(keyPath, 'utf8');
  try {
    const key = parsePrivateKey(pem, options.passphrase);
    return { signer: key, publicKeyBlob: key.publicKeyBlob, via: 'key file' };
  } catch (error) {
    if (!(error instanceof SshKeyError)) throw error;
    if (
      error.code === 'passphrase_required' &&
      options.passphrase === undefined &&
      canPrompt(context.stdin)
    ) {
      const passphrase = await promptHidden(`Passphrase for ${keyPath}: `, context.stdin, context.stderr);
      return readKeyFile(keyPath, { ...options, passphrase }, context);
    }
    throw keyFileProblem(error, keyPath, options, context);
  }
}

export async function findSigner(
  keyPath: string,
  options: LoginOptions,
  context: SvcContext,
): Promise<KeySigner> {
  const publicPath = `${keyPath}.pub`;
  if (context.env.SSH_AUTH_SOCK && existsSync(publicPath)) {
    try {
      const { publicKeyBlob } = parsePublicKeyLine(readFileSync(publicPath, 'utf8'));
      const signer = await agentSigner(context.env.SSH_AUTH_SOCK, publicKeyBlob);
      if (signer) return { signer, publicKeyBlob, via: 'ssh-agent' };
    } catch (error) {
      // As ssh does: an agent or .pub that fails is reported, and the key file is tried instead.
      const reason = error instanceof Error ? error.message : String(error);
      context.stderr.write(`svc: not using ssh-agent (${reason}); reading ${keyPath} instead\n`);
    }
  }
  return readKeyFile(keyPath, options, context);
}
