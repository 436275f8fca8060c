import { Command } from 'clipanion';
import { RolloutMoveCommand } from './move-command.ts';

export class RolloutPauseCommand extends RolloutMoveCommand {
  static override paths = [['rollout', 'pause']];

  static override usage = Command.Usage({
    category: 'Review and release',
    description: "pause an app's rollout: no more install commands until it is resumed",
    details: `
      Stops the rollout where it is: the cars that got the version keep it, and no install command is made for the app until \`svc rollout resume <app-id>\`. A paused rollout can still be completed or rolled back.
    `,
    examples: [
      ['Pause the rollout of an app', 'svc rollout pause com.example.hello-car'],
      ['As JSON', 'svc rollout pause com.example.hello-car --json'],
    ],
  });

  protected readonly move = 'pause' as const;
}
