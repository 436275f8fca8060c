import { Command, Option } from 'clipanion';
import { DataCommand } from '../../base-command.ts';

export class RolloutResumeCommand extends DataCommand {
  static override paths = [['rollout', 'resume']];

  static override usage = Command.Usage({
    category: 'Review and release',
    description: "go on with an app's paused rollout",
    details: `
      The rollout goes on at its percentage: the cars in its share that do not have the version yet get it.
    `,
    examples: [
      ['Resume the rollout of an app', 'svc rollout resume com.example.hello-car'],
      ['As JSON', 'svc rollout resume com.example.hello-car --json'],
    ],
  });

  appId = Option.String({ name: 'app-id' });

  async execute(): Promise<number> {
    const { checkAppId } = await import('../../app-versions.ts');
    const { reportMove } = await import('../../rollouts.ts');
    const appId = checkAppId(this.appId);
    const session = await this.session();
    const { stdout, stderr } = this.context;
    return reportMove(session, { stdout, stderr, json: this.json }, appId, 'resume');
  }
}
