import { Command } from 'clipanion';
import { ServiceCommand } from '../base-command.ts';

export class LogoutCommand extends ServiceCommand {
  static override paths = [['logout']];

  static override usage = Command.Usage({
    description: 'end your session and remove the local token (your SSH key stays registered)',
    details: `
      Ends the stored token's session at the service it came from, so that a copy of it stops working too, and removes the token from this machine (even when the service cannot be reached). To stop a key signing in, remove it with \`svc keys remove <id>\`.
    `,
    examples: [['Sign out on this machine', 'svc logout']],
  });

  async execute(): Promise<number> {
    const { endSession, openContextTokenStore } = await import('../session.ts');
    const { stdout, stderr, env } = this.context;
    const store = await openContextTokenStore(this.context);
    const stored = await store.read();
    const ended = stored ? await endSession(stored) : false;
    const removed = await store.remove();
    stdout.write(
      removed
        ? `Signed out: the local token is removed${ended ? ', and its session ended at the service' : ''}.\n`
        : 'No token was stored on this machine.\n',
    );
    if (stored && !ended) {
      stderr.write(
        `  The service at ${stored.api_url} did not end the session; the token lapses at ${stored.expires_at}.\n`,
      );
    }
    stderr.write('  Your SSH key stays registered; to stop it signing in, run `svc keys remove <id>`.\n');
    if (env.SVC_TOKEN) stderr.write('  SVC_TOKEN is still set in your environment, and svc still uses it.\n');
    return 0;
  }
}
