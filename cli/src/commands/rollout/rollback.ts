import { Command, Option } from 'clipanion';
import { DataCommand } from '../../base-command.ts';
import { CliError, ExitCode } from '../../errors.ts';
import type { Session } from '../../session.ts';

export class RolloutRollbackCommand extends DataCommand {
  static override paths = [['rollout', 'rollback']];

  static override usage = Command.Usage({
    category: 'Review and release',
    description: "roll an app's rollout back: the cars that got the version are moved back",
    details: `
      Ends the rollout: the cars that got the version are moved back to the version live before it, and the version becomes \`rolled_back\` and can no longer be installed. It cannot be undone. On a terminal svc asks first; elsewhere give \`--yes\`.
    `,
    examples: [
      ['Roll back, after a question', 'svc rollout rollback com.example.hello-car'],
      ['Roll back without being asked (CI)', 'svc rollout rollback com.example.hello-car --yes'],
    ],
  });

  yes = Option.Boolean('--yes', false, { description: 'Roll back without asking' });
  appId = Option.String({ name: 'app-id' });

  async execute(): Promise<number> {
    const { checkAppId } = await import('../../app-versions.ts');
    const { reportMove } = await import('../../rollouts.ts');
    const appId = checkAppId(this.appId);
    const session = await this.session();
    if (!this.yes && !(await this.confirmRollback(session, appId))) {
      this.context.stderr.write('Nothing rolled back.\n');
      return ExitCode.failure;
    }
    const { stdout, stderr } = this.context;
    return reportMove(session, { stdout, stderr, json: this.json }, appId, 'rollback');
  }

  /** A rollback moves cars and cannot be undone: a person is asked, a script must say --yes. */
  private async confirmRollback(session: Session, appId: string): Promise<boolean> {
    const { canPrompt, confirm } = await import('../../prompt.ts');
    const { stdin, stderr } = this.context;
    if (!canPrompt(stdin)) {
      throw new CliError(
        `rolling back moves the cars that got the new version of ${appId} back, and cannot be undone: run again with --yes to roll back without a terminal to ask on.`,
        ExitCode.usage,
      );
    }
    // Said with what it will do, read from the service: which version, which cars, back to what.
    const { readRollout } = await import('../../rollouts.ts');
    const rollout = await readRollout(session, appId);
    // An ended rollout has nothing to ask about: the service's refusal says so.
    if (rollout.state === 'completed' || rollout.state === 'rolled_back') return true;
    const { version, previous_version: previous, progress } = rollout;
    stderr.write(
      `The rollout of ${appId} ${version} is ${rollout.state} at ${rollout.percent} %, and ${progress.installed} cars have it installed. ` +
        `Rolling it back moves the cars that got it back${previous ? ` to ${previous}` : ''}, and ${version} can no longer be installed.\n`,
    );
    return confirm('Roll it back?', stdin, stderr);
  }
}
