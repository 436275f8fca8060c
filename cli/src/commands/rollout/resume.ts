import { Command } from 'clipanion';
import { RolloutMoveCommand } from './move-command.ts';

export class RolloutResumeCommand extends RolloutMoveCommand {
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

  protected readonly move = 'resume' as const;
}
