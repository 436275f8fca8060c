import { Command, Option } from 'clipanion';
import { DataCommand } from '../../base-command.ts';

export class RolloutSetCommand extends DataCommand {
  static override paths = [['rollout', 'set']];

  static override usage = Command.Usage({
    category: 'Review and release',
    description: "raise the share of the eligible cars that an app's rollout reaches",
    details: `
      Sets the rollout's percentage of the eligible cars, which only grows: the cars that got the version keep it, and the cars already in stay in. To take the version back from cars, roll the rollout back with \`svc rollout rollback <app-id>\`; to give it to every car, \`svc rollout complete <app-id>\`.
    `,
    examples: [
      ['Raise the rollout to half the cars', 'svc rollout set 50 com.example.hello-car'],
      ['As JSON', 'svc rollout set 50 com.example.hello-car --json'],
    ],
  });

  percent = Option.String({ name: 'percent' });
  appId = Option.String({ name: 'app-id' });

  async execute(): Promise<number> {
    const { checkAppId } = await import('../../app-versions.ts');
    const { parsePercent, reportMove } = await import('../../rollouts.ts');
    // `svc rollout set com.example.hello-car 50` means the same: an app id is never a number.
    const swapped = /^\d+\s*%?$/.test(this.appId) && !/^\d+\s*%?$/.test(this.percent);
    const [percentWord, appWord] = swapped ? [this.appId, this.percent] : [this.percent, this.appId];
    const appId = checkAppId(appWord);
    const percent = parsePercent(percentWord, 'the percentage');
    const session = await this.session();
    const { stdout, stderr } = this.context;
    return reportMove(session, { stdout, stderr, json: this.json }, appId, 'set_percent', percent);
  }
}
