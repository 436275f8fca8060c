import { Command } from 'clipanion';
import { DataCommand } from '../../base-command.ts';

export class KeysListCommand extends DataCommand {
  static override paths = [['keys', 'list']];

  static override usage = Command.Usage({
    category: 'SSH keys',
    description: 'list the SSH keys that can sign in to your account',
    examples: [
      ['Your keys', 'svc keys list'],
      ['As JSON', 'svc keys list --json'],
    ],
  });

  async execute(): Promise<number> {
    const { expectOk } = await import('../../session.ts');
    const { formatTable } = await import('../../table.ts');
    const session = await this.session();
    const { keys } = await expectOk(session, session.client.GET('/api/v1/dev/keys'));
    if (this.json) {
      this.context.stdout.write(`${JSON.stringify({ keys })}\n`);
      return 0;
    }
    const rows = keys.map((key) => [
      key.id,
      key.title,
      key.fingerprint,
      key.created_at,
      key.last_used_at ?? 'never',
    ]);
    this.context.stdout.write(formatTable(['ID', 'TITLE', 'FINGERPRINT', 'ADDED', 'LAST USED'], rows));
    return 0;
  }
}
