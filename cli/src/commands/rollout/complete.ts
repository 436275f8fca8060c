import { Command, Option } from 'clipanion';
import { DataCommand } from '../../base-command.ts';

export class RolloutCompleteCommand extends DataCommand {
  static override paths = [['rollout', 'complete']];

  static override usage = Command.Usage({
    category: 'Review and release',
    description: 'give the rolled-out version to every eligible car, and publish it',
    details: `
      Ends the rollout at 100 %: every eligible car gets the version, which becomes \`published\`, and the version live before becomes \`superseded\`.
    `,
    examples: [
      ['Complete the rollout of an app', 'svc rollout complete com.example.hello-car'],
      ['As JSON', 'svc rollout complete com.example.hello-car --json'],
    ],
  });

  appId = Option.String({ name: 'app-id' });

  async execute(): Promise<number> {
    const { checkAppId } = await import('../../app-versions.ts');
    const { reportMove } = await import('../../rollouts.ts');
    const appId = checkAppId(this.appId);
    const session = await this.session();
    const { stdout, stderr } = this.context;
    return reportMove(session, { stdout, stderr, json: this.json }, appId, 'complete');
  }
}
