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
    const { CliError, ExitCode } = await import('../../errors.ts');
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(this.id)) {
      throw new CliError(
        `"${this.id}" is not a key id: ids look like 3c1e2d4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f (see \`svc keys list\`).`,
        ExitCode.usage,
      );
    }
    const { expectOk, openSession, requireToken } = await import('../../session.ts');
    const session = await openSession(this.context, this.apiUrl);
    requireToken(session);
    // Asked before the removal: removing the key this session came from ends the session too.
    const { keys } = await expectOk(session, session.client.GET('/api/v1/dev/keys'));
    await expectOk(
      session,
      session.client.DELETE('/api/v1/dev/keys/{key_id}', { params: { path: { key_id: this.id } } }),
    );
    this.context.stdout.write(
      `Removed key ${this.id}: it can no longer sign in, and its sessions have ended.\n`,
    );
    if (keys.length === 1 && keys[0]?.id === this.id) {
      this.context.stderr.write(
        '  That was your last key: register a new one (README, "Your first key") before you can `svc login` again.\n',
      );
    }
    return 0;
  }
}
