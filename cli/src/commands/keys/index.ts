import { Command } from 'clipanion';
import { BaseCommand } from '../../base-command.ts';

/** `svc keys` alone: which keys commands there are, instead of "command not found". */
export class KeysCommand extends BaseCommand {
  static override paths = [['keys']];

  static override usage = Command.Usage({
    category: 'SSH keys',
    description: 'list the commands that manage your SSH keys',
    details: `
      \`svc keys list\` lists the keys registered to your account, \`svc keys add <path-to-pub>\` registers another public key, and \`svc keys remove <id>\` removes one so that it can no longer sign in. Your first key is added in the service's web console (\`/console\`, SSH keys).
    `,
    examples: [['The keys commands', 'svc keys']],
  });

  async execute(): Promise<number> {
    this.context.stdout.write(
      [
        'svc keys <command>: manage the SSH keys that can sign you in',
        '',
        '  svc keys list                 the keys registered to your account (--json)',
        '  svc keys add <path-to-pub>    register another public key (--title <title>)',
        '  svc keys remove <id>          remove a key so that it can no longer sign in',
        '',
        'Run `svc keys <command> --help` for the details of one.',
        '',
      ].join('\n'),
    );
    return 0;
  }
}
