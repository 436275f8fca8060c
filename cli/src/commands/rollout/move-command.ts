/** A rollout move that takes only the app id (pause, resume, complete): said as `svc rollout status` says it. */
import { Option } from 'clipanion';
import { DataCommand } from '../../base-command.ts';

export abstract class RolloutMoveCommand extends DataCommand {
  protected abstract readonly move: 'pause' | 'resume' | 'complete';

  appId = Option.String({ name: 'app-id' });

  async execute(): Promise<number> {
    const { checkAppId } = await import('../../app-versions.ts');
    const { reportMove } = await import('../../rollouts.ts');
    const appId = checkAppId(this.appId);
    const session = await this.session();
    const { stdout, stderr } = this.context;
    return reportMove(session, { stdout, stderr, json: this.json }, appId, this.move);
  }
}
