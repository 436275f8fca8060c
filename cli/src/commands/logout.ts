import { Command } from 'clipanion';
import { BaseCommand } from '../base-command.ts';

export class LogoutCommand extends BaseCommand {
  static override paths = [['logout']];

  static override usage = Command.Usage({
    description: 'remove the local token (your SSH key stays registered)',
    details: `
      Removes the token stored on this machine, and nothing else: it makes no network call, so a copy of the token you gave a CI job (as \`SVC_TOKEN\`) keeps working until it lapses. To stop a key signing in, remove it with \`svc keys remove <id>\`.
    `,
    examples: [['Sign out on this machine', 'svc logout']],
  });

  async execute(): Promise<number> {
    const { openContextTokenStore } = await import('../session.ts');
    const { stdout, stderr, env } = this.context;
    const store = await openContextTokenStore(this.context);
    const stored = await store.read();
    const removed = await store.remove();
    stdout.write(
      removed ? 'Signed out: the local token is removed.\n' : 'No token was stored on this machine.\n',
    );
    // Logout is local only (the spec): a copy of the token elsewhere is not ended, so say until when it works.
    if (stored) stderr.write(`  A copy of that token made elsewhere works until ${stored.expires_at}.\n`);
    stderr.write('  Your SSH key stays registered; to stop it signing in, run `svc keys remove <id>`.\n');
    if (env.SVC_TOKEN) stderr.write('  SVC_TOKEN is still set in your environment, and svc still uses it.\n');
    return 0;
  }
}
