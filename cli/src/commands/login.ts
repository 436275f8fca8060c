import { Command, Option } from 'clipanion';
import { ServiceCommand } from '../base-command.ts';

export class LoginCommand extends ServiceCommand {
  static override paths = [['login']];

  static override usage = Command.Usage({
    description: 'sign in by signing a one-time challenge with your ed25519 SSH key',
    details: `
      Signs a one-time challenge from the service with your SSH key (through ssh-agent when it holds the key) and keeps the short-lived access token it returns. No browser, no password. Each login mints a fresh token.

      The first key is added in the service's web console (\`/console\`, SSH keys: paste the \`.pub\` file); later keys can be managed with \`svc keys\`. In CI, give the runner its own key and run \`svc login --key <path>\`, or set \`SVC_TOKEN\`.
    `,
    examples: [
      ['Sign in with ~/.ssh/id_ed25519', 'svc login'],
      ['Sign in with another key', 'svc login --key ~/.ssh/ci_ed25519'],
      ['Sign in to another service', 'svc login --api-url https://svc.example.com'],
    ],
  });

  key = Option.String('--key', { description: 'Private key to sign with (default ~/.ssh/id_ed25519)' });
  passphrase = Option.String('--passphrase', {
    description: 'Passphrase of a protected key (else asked on a terminal)',
  });
  ci = Option.Boolean('--ci', false, { description: 'Only remind how CI signs in (SVC_TOKEN)' });

  async execute(): Promise<number> {
    const { stdout, stderr } = this.context;
    if (this.ci) {
      stdout.write(
        'In CI, set SVC_TOKEN to an access token: svc uses it before any stored token.\n' +
          'Or give the runner its own ed25519 key, register its .pub, and run `svc login --key <path>` at job start.\n',
      );
      return 0;
    }
    const { signIn } = await import('../sign-in.ts');
    // Not signed in yet, or signed in elsewhere: that is what login is for.
    const session = await this.session({ signedIn: false });
    const result = await signIn(session, { keyPath: this.key, passphrase: this.passphrase }, this.context);
    stdout.write(`Signed in to ${result.apiUrl} as ${result.email}\n`);
    stderr.write(
      `  key ${result.keyFingerprint} (${result.keyPath}, via ${result.via}); token stored in the ${result.store === 'keyring' ? 'credential store' : 'config file'}, valid until ${result.expiresAt}\n`,
    );
    if (session.token?.source === 'SVC_TOKEN') {
      stderr.write('  note: SVC_TOKEN is set, and svc uses it before the token just stored.\n');
    }
    return 0;
  }
}
