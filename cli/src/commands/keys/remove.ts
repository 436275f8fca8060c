import { Command, Option } from 'clipanion';
import * as t from 'typanion';
import { ServiceCommand } from '../../base-command.ts';
import { CliError, ExitCode } from '../../errors.ts';

/** The service names keys by UUID v4, as `svc keys list` shows them. */
const isKeyId = t.isUUID4();

/** A last key gone, the way back in is the web console of that same service. */
const howToGetBackIn = (apiUrl: string) =>
  `To sign in again, add a public key in the service's web console (${apiUrl}/console/keys), then run \`svc login\`.`;

export class KeysRemoveCommand extends ServiceCommand {
  static override paths = [['keys', 'remove']];

  static override usage = Command.Usage({
    category: 'SSH keys',
    description: 'remove a key so that it can no longer sign in',
    details: `
      The key can no longer sign in, and the sessions it started end. Your other keys are untouched. Find the id with \`svc keys list\`.
    `,
    examples: [
      ['Remove a key', 'svc keys remove 3c1e2d4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f'],
      [
        'Remove your last key, without being asked',
        'svc keys remove 3c1e2d4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f --yes',
      ],
    ],
  });

  yes = Option.Boolean('--yes', false, { description: 'Remove your last key without asking' });

  id = Option.String({ name: 'id' });

  async execute(): Promise<number> {
    // Checked here, not as clipanion's `validator`: its refusal ("Invalid value for id: Expected to
    // be a valid UUID v4") cannot say where ids are found.
    if (!isKeyId(this.id)) {
      throw new CliError(
        `"${this.id}" is not a key id: ids look like 3c1e2d4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f (see \`svc keys list\`).`,
        ExitCode.usage,
      );
    }
    const { expectOk } = await import('../../session.ts');
    const session = await this.session();
    // Asked before the removal: removing the key this session came from ends the session too.
    const { keys } = await expectOk(session, session.client.GET('/api/v1/dev/keys'));
    const last = keys.length === 1 && keys[0]?.id === this.id;
    if (last && !this.yes && !(await this.confirmLastKey(session.apiUrl))) {
      this.context.stderr.write('Nothing removed.\n');
      return ExitCode.failure;
    }
    await expectOk(
      session,
      session.client.DELETE('/api/v1/dev/keys/{key_id}', { params: { path: { key_id: this.id } } }),
    );
    this.context.stdout.write(
      `Removed key ${this.id}: it can no longer sign in, and its sessions have ended.\n`,
    );
    if (last) this.context.stderr.write(`  That was your last key. ${howToGetBackIn(session.apiUrl)}\n`);
    return 0;
  }

  /** Without a key no `svc login` works, and `svc keys add` needs a session: ask first. */
  private async confirmLastKey(apiUrl: string): Promise<boolean> {
    const { canPrompt, confirm } = await import('../../prompt.ts');
    const { stdin, stderr } = this.context;
    if (!canPrompt(stdin)) {
      throw new CliError(
        `${this.id} is your last key: without it \`svc login\` cannot work until you add a new key in the service's web console (${apiUrl}/console/keys). Run again with --yes to remove it anyway.`,
        ExitCode.usage,
      );
    }
    stderr.write(`${this.id} is your last key. ${howToGetBackIn(apiUrl)}\n`);
    return confirm('Remove it?', stdin, stderr);
  }
}
