/**
 * `svc login`: prove possession of the SSH key by signing the service's one-time challenge, then
 * keep the access token. Nothing is signed unless the challenge is for this service and this key.
 */
import { fingerprint, formatPublicKeyLine, loginNamespace, signSshsig } from '@svc/ssh';
import type { SvcContext } from './context.ts';
import { AuthenticationNeeded, CliError, ExitCode } from './errors.ts';
import { expectOk, type Session } from './session.ts';
import { defaultKeyPath, expandHome, findSigner, type LoginOptions, registerHint } from './signing-key.ts';

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

export async function signIn(session: Session, options: LoginOptions, context: SvcContext) {
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
          `If not, ${registerHint(keyPath, apiUrl)}, or run \`svc keys add ${keyPath}.pub\` where you are signed in.`,
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
