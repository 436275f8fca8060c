import { Command } from 'clipanion';
import { RolloutMoveCommand } from './move-command.ts';

export class RolloutCompleteCommand extends RolloutMoveCommand {
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

  protected readonly move = 'complete' as const;
}
