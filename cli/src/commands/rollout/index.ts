import { Command } from 'clipanion';
import { BaseCommand } from '../../base-command.ts';

/** `svc rollout` alone: which rollout commands there are, instead of "command not found". */
export class RolloutCommand extends BaseCommand {
  static override paths = [['rollout']];

  static override usage = Command.Usage({
    category: 'Review and release',
    description: "list the commands that follow and move an app's staged rollout",
    details: `
      A staged rollout starts with \`svc release <app-id> <version> --rollout <percent>\`. Then \`svc rollout status <app-id>\` shows it and its progress on the cars, and \`set\`, \`pause\`, \`resume\`, \`complete\` and \`rollback\` move it.
    `,
    examples: [['The rollout commands', 'svc rollout']],
  });

  async execute(): Promise<number> {
    this.context.stdout.write(
      [
        "svc rollout <command> <app-id>: follow and move an app's staged rollout",
        '',
        '  svc rollout status <app-id>           the rollout and its progress (--watch, --json)',
        '  svc rollout set <percent> <app-id>    raise the share of the eligible cars that get the version',
        '  svc rollout pause <app-id>            make no more install commands until it is resumed',
        '  svc rollout resume <app-id>           go on with a paused rollout',
        '  svc rollout complete <app-id>         give the version to every eligible car, and publish it',
        '  svc rollout rollback <app-id>         move the cars that got the version back (asks first; --yes)',
        '',
        'A rollout starts with `svc release <app-id> <version> --rollout <percent>`.',
        'Run `svc rollout <command> --help` for the details of one.',
        '',
      ].join('\n'),
    );
    return 0;
  }
}
