/**
 * `svc login`: prove possession of the SSH key by signing the service's one-time challenge, then
 * keep the access token. Through ssh-agent when it holds the key (no private key is read then),
 * else from the key file. Nothing is signed unless the challenge is for this service and this key.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  fingerprint,
  formatPublicKeyLine,
  loginNamespace,
  parsePrivateKey,
  parsePublicKeyLine,
  SshKeyError,
  type SshSigner,
  signSshsig,
} from '@svc/ssh';
import type { SvcContext } from './context.ts';
import { AuthenticationNeeded, CliError, ExitCode } from './errors.ts';
import { canPrompt, promptHidden } from './prompt.ts';
import { expectOk, type Session } from './session.ts';
import { agentSigner } from './ssh-agent.ts';

export interface LoginOptions {
  keyPath: string | undefined;
  passphrase: string | undefined;
}

/** How a first key gets registered while there is no web console: the account API (README: "Your first key"). */
function registerHint(keyPath: string): string {
  return `register ${keyPath}.pub through the account API (see the README, "Your first key")`;
}

export function defaultKeyPath(home: string): string {
  return join(home, '.ssh', 'id_ed25519');
}

function expandHome(path: string, home: string): string {
  return path === '~' || path.startsWith('~/') ? join(home, path.slice(1)) : path;
}

interface KeySigner {
  signer: SshSigner;
  publicKeyBlob: Buffer;
  via: 'ssh-agent' | 'key file';
}

function keyFileProblem(error: SshKeyError, keyPath: string, context: SvcContext): CliError {
  switch (error.code) {
    case 'passphrase_required': {
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
    throw keyFileProblem(error, keyPath, context);
  }
}

async function findSigner(keyPath: string, options: LoginOptions, context: SvcContext): Promise<KeySigner> {
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

/** The fields of the challenge message, one `name: value` per line after the namespace line. */
function challengeFields(message: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of message.split('\n').slice(1)) {
    const colon = line.indexOf(': ');
    if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 2));
  }
  return fields;
}

/** Refuses to sign anything but a login challenge for this service and this key. */
export function checkChallenge(
  challenge: { namespace: string; message: string },
  expected: { apiUrl: string; fingerprint: string },
): void {
  const fields = challengeFields(challenge.message);
  const problems: string[] = [];
  if (challenge.namespace !== loginNamespace || challenge.message.split('\n')[0] !== loginNamespace) {
    problems.push(`its namespace is not ${loginNamespace}`);
  }
  if (fields.get('audience') !== expected.apiUrl) {
    problems.push(`it is for ${fields.get('audience') ?? 'no audience'}, not ${expected.apiUrl}`);
  }
  if (fields.get('fingerprint') !== expected.fingerprint) {
    problems.push(`it names key ${fields.get('fingerprint') ?? 'none'}, not ${expected.fingerprint}`);
  }
  if (problems.length > 0) {
    const audience = fields.get('audience');
    const fix =
      audience && audience !== expected.apiUrl && /^https?:\/\//.test(audience)
        ? ` If ${audience} is the service you mean, sign in with --api-url ${audience} (or SVC_API_URL); ` +
          `if you run the service and clients reach it as ${expected.apiUrl}, set its SVC_PUBLIC_URL to ${expected.apiUrl}.`
        : '';
    throw new CliError(
      `refusing to sign the challenge from ${expected.apiUrl}: ${problems.join('; ')}.${fix}`,
    );
  }
}

export async function login(session: Session, options: LoginOptions, context: SvcContext) {
  if (options.keyPath !== undefined && options.keyPath.trim() === '') {
    throw new CliError(
      `--key needs the path of a private key, such as --key ${defaultKeyPath('~')} (the default when --key is left out).`,
      ExitCode.usage,
    );
  }
  const keyPath = expandHome(options.keyPath ?? defaultKeyPath(context.home), context.home);
  const { signer, publicKeyBlob, via } = await findSigner(keyPath, options, context);
  const keyFingerprint = fingerprint(publicKeyBlob);
  const { client, apiUrl } = session;

  const challenge = await expectOk(
    session,
    client.POST('/api/v1/auth/challenges', { body: { public_key: formatPublicKeyLine({ publicKeyBlob }) } }),
  );
  checkChallenge(challenge, { apiUrl, fingerprint: keyFingerprint });
  const signature = await signSshsig(challenge.message, signer, loginNamespace);
  const token = await expectOk(
    session,
    client.POST('/api/v1/auth/tokens', { body: { challenge_id: challenge.challenge_id, signature } }),
  ).catch((error: unknown) => {
    if (error instanceof AuthenticationNeeded) {
      throw new AuthenticationNeeded(
        `the service at ${apiUrl} did not accept the key ${keyFingerprint} (${keyPath}). Is it registered? ` +
          `${registerHint(keyPath)}, or run \`svc keys add ${keyPath}.pub\` where you are signed in.`,
      );
    }
    throw error;
  });
  await session.store.write({
    access_token: token.access_token,
    expires_at: token.expires_at,
    api_url: apiUrl,
  });
  const me = await expectOk(
    session,
    client.GET('/api/v1/dev/me', { headers: { authorization: `Bearer ${token.access_token}` } }),
  );
  return {
    apiUrl,
    keyPath,
    keyFingerprint,
    via,
    expiresAt: token.expires_at,
    email: me.account.email,
    store: session.store.kind,
  };
}
