import { Command, Option } from 'clipanion';
import { BaseCommand } from '../../base-command.ts';

export class KeysRemoveCommand extends BaseCommand {
  static override paths = [['keys', 'remove']];

  static override usage = Command.Usage({
    category: 'SSH keys',
    description: 'remove a key so that it can no longer sign in',
    details: `
      The key can no longer sign in, and the sessions it started end. Your other keys are untouched. Find the id with \`svc keys list\`.
    `,
    examples: [['Remove a key', 'svc keys remove 3c1e2d4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f']],
  });

  id = Option.String({ name: 'id' });

  async execute(): Promise<number> {
    const { expectOk, openSession, requireToken } = await import('../../session.ts');
    const session = await openSession(this.context, this.apiUrl);
    requireToken(session);
    await expectOk(
      session,
      session.client.DELETE('/api/v1/dev/keys/{key_id}', { params: { path: { key_id: this.id } } }),
    );
    this.context.stdout.write(
      `Removed key ${this.id}: it can no longer sign in, and its sessions have ended.\n`,
    );
    return 0;
  }
}
