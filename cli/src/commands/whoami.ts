import { Command } from 'clipanion';
import { DataCommand } from '../base-command.ts';

export class WhoamiCommand extends DataCommand {
  static override paths = [['whoami']];

  static override usage = Command.Usage({
    description: 'show who you are signed in as, and where the token comes from',
    examples: [
      ['Who am I', 'svc whoami'],
      ['As JSON', 'svc whoami --json'],
    ],
  });

  async execute(): Promise<number> {
    const { expectOk } = await import('../session.ts');
    const session = await this.session();
    const me = await expectOk(session, session.client.GET('/api/v1/dev/me'));
    const source = session.token?.source ?? 'keyring';
    if (this.json) {
      this.context.stdout.write(
        `${JSON.stringify({ api_url: session.apiUrl, token_source: source, ...me })}\n`,
      );
      return 0;
    }
    const { account, token } = me;
    const roles = account.roles.includes('admin') ? ' (admin)' : '';
    const minted = token.source === 'ssh_key' ? `SSH key ${token.key_fingerprint}` : 'a web-console session';
    const from = {
      SVC_TOKEN: 'the SVC_TOKEN variable',
      keyring: 'the credential store',
      file: `the config file ${session.store.file} (no credential store here; readable only by you)`,
    }[source];
    this.context.stdout.write(
      `Signed in to ${session.apiUrl} as ${account.name} <${account.email}>${roles}\n` +
        `  token from ${from}, minted by ${minted}, valid until ${token.expires_at}\n`,
    );
    return 0;
  }
}
