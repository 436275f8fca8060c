import { Command, Option } from 'clipanion';
import { DataCommand } from '../../base-command.ts';

export class RolloutStatusCommand extends DataCommand {
  static override paths = [['rollout', 'status']];

  static override usage = Command.Usage({
    category: 'Review and release',
    description: "show an app's rollout and its progress on the cars",
    details: `
      Shows the app's rollout (the one under way, else the last one): the version, the version live before it, the percentage, the brands and its state, then the eligible cars counted by where the version stands on them (waiting, queued, sent, installed, failed, expired). No device id is shown.

      With \`--watch\` it is read again every 2 seconds until the rollout has completed or been rolled back and nothing is queued or sent any more, or until Ctrl-C: on a terminal the table is redrawn in place, otherwise a new table (with \`--json\`, a new JSON line) is printed whenever something changed. Then the exit code is 0 when the rollout completed, 1 when it was rolled back, 130 after Ctrl-C.
    `,
    examples: [
      ['The rollout of an app', 'svc rollout status com.example.hello-car'],
      ['Follow it until it ends', 'svc rollout status com.example.hello-car --watch'],
      ['As JSON', 'svc rollout status com.example.hello-car --json'],
    ],
  });

  watch = Option.Boolean('--watch', false, {
    description: 'Read it again every 2 seconds until it has ended (Ctrl-C stops)',
  });
  appId = Option.String({ name: 'app-id' });

  async execute(): Promise<number> {
    const { checkAppId } = await import('../../app-versions.ts');
    const { formatRollout, nextMoves, readRollout } = await import('../../rollouts.ts');
    const appId = checkAppId(this.appId);
    const session = await this.session();
    if (this.watch) {
      const { watchRollout } = await import('../../rollout-watch.ts');
      return watchRollout(session, appId, this.context, { json: this.json });
    }
    const rollout = await readRollout(session, appId);
    if (this.json) {
      this.context.stdout.write(`${JSON.stringify(rollout)}\n`);
      return 0;
    }
    this.context.stdout.write(formatRollout(rollout));
    const next = nextMoves(rollout);
    if (next) this.context.stderr.write(`  ${next}\n`);
    return 0;
  }
}
