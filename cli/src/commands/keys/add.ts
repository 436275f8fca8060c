import { Command, Option } from 'clipanion';
import { ServiceCommand } from '../../base-command.ts';

export class KeysAddCommand extends ServiceCommand {
  static override paths = [['keys', 'add']];

  static override usage = Command.Usage({
    category: 'SSH keys',
    description: 'register another ed25519 public key to sign in with',
    examples: [
      ['Add a key', 'svc keys add ~/.ssh/laptop_ed25519.pub'],
      ['Add a key with a title', 'svc keys add ~/.ssh/ci_ed25519.pub --title "CI runner"'],
    ],
  });

  title = Option.String('--title', {
    description: 'A name for the key (default: the comment in the .pub file)',
  });
  publicKeyPath = Option.String({ name: 'path-to-pub' });

  async execute(): Promise<number> {
    const { readPublicKeyFile } = await import('../../key-files.ts');
    const { expectOk } = await import('../../session.ts');
    const session = await this.session();
    const publicKey = readPublicKeyFile(this.publicKeyPath, this.context.home);
    const key = await expectOk(
      session,
      session.client.POST('/api/v1/dev/keys', {
        body: { public_key: publicKey, ...(this.title ? { title: this.title } : {}) },
      }),
    );
    this.context.stdout.write(`Added key ${key.fingerprint} (${key.title}) with id ${key.id}\n`);
    return 0;
  }
}
