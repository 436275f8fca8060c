import { Command } from 'clipanion';
import { ServiceCommand } from '../base-command.ts';

export class LogoutCommand extends ServiceCommand {
  static override paths = [['logout']];

  static override usage = Command.Usage({
    description: 'remove the local token (your SSH key stays registered)',
    details: `
      Removes only the token stored on this machine; there is no long-lived server-side credential to revoke. To stop a key signing in, remove it with \`svc keys remove <id>\`.
    `,
    examples: [['Sign out on this machine', 'svc logout']],
  });

  async execute(): Promise<number> {
    const { openContextTokenStore } = await import('../session.ts');
    const { stdout, stderr, env } = this.context;
    const store = await openContextTokenStore(this.context);
    const removed = await store.remove();
    stdout.write(
      removed ? 'Signed out: the local token is removed.\n' : 'No token was stored on this machine.\n',
    );
    stderr.write('  Your SSH key stays registered; to stop it signing in, run `svc keys remove <id>`.\n');
    if (env.SVC_TOKEN) stderr.write('  SVC_TOKEN is still set in your environment, and svc still uses it.\n');
    return 0;
  }
}
