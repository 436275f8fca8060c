import type { components } from '@svc/sdk';
import { Command } from 'clipanion';
import { DataCommand } from '../base-command.ts';

type MiniApp = components['schemas']['MiniApp'];

export class StatusCommand extends DataCommand {
  static override paths = [['status']];

  static override usage = Command.Usage({
    description: 'show your mini-apps and where each is in review and release',
    details: `
      One line per app: its latest version and where it is (submitted, in review, approved, rejected, published, rolling out with its percentage, rolled back, withdrawn, superseded, removed), and the version live on cars. Below the table, what you can do next: release an approved version with \`svc release\`, follow a rollout with \`svc rollout status\`.
    `,
    examples: [
      ['Your apps', 'svc status'],
      ['As JSON', 'svc status --json'],
    ],
  });

  async execute(): Promise<number> {
    const { expectOk } = await import('../session.ts');
    const { formatTable } = await import('../table.ts');
    const { reviewStateInWords } = await import('../review-states.ts');
    const session = await this.session();
    const { mini_apps: apps } = await expectOk(session, session.client.GET('/api/v1/mini-apps/mine'));
    if (this.json) {
      this.context.stdout.write(`${JSON.stringify({ mini_apps: apps })}\n`);
      return 0;
    }
    if (apps.length === 0) {
      this.context.stdout.write('You have no mini-apps yet: publish one with `svc publish`.\n');
      return 0;
    }
    const percents = await this.rolloutPercents(apps);
    const rows = apps.map((app) => {
      const latest = app.latest_version;
      const words = latest ? reviewStateInWords(latest.review_state, percents.get(app.id)) : '-';
      const state = latest?.reason ? `${words} (${latest.reason})` : words;
      return [app.id, app.name, latest?.version ?? '-', state, app.live_version ?? '-', app.updated_at];
    });
    this.context.stdout.write(formatTable(['APP', 'NAME', 'LATEST', 'REVIEW', 'LIVE', 'CHANGED'], rows));
    // A live version an admin removed is no longer the latest one, so its reason has no row above.
    for (const app of apps) {
      for (const version of app.versions) {
        if (version.id === app.latest_version?.id || version.review_state !== 'removed') continue;
        const reason = version.reason ? `: ${version.reason}` : '';
        this.context.stdout.write(`${app.id} ${version.version} was removed by an admin${reason}\n`);
      }
    }
    this.nextSteps(apps, percents);
    return 0;
  }

  /**
   * The share of each app's rollout under way, to say "rolling out (10 %)" (or "10 %, paused"): one read of the
   * rollout per app that has a version rolling out. Only a nicety: when a read fails, the state
   * is said without it.
   */
  private async rolloutPercents(apps: MiniApp[]): Promise<Map<string, string>> {
    const rolling = apps.filter((app) => app.versions.some((v) => v.review_state === 'rolling_out'));
    if (rolling.length === 0) return new Map();
    const { readRollout } = await import('../rollouts.ts');
    const session = await this.session();
    const read = await Promise.all(
      rolling.map((app) =>
        readRollout(session, app.id).then(
          (rollout) =>
            [app.id, `${rollout.percent} %${rollout.state === 'paused' ? ', paused' : ''}`] as const,
          () => undefined,
        ),
      ),
    );
    return new Map(read.filter((entry) => entry !== undefined));
  }

  /** What a developer can do next with a version that waits on them: release it, follow its rollout. */
  private nextSteps(apps: MiniApp[], percents: Map<string, string>): void {
    for (const app of apps) {
      for (const version of app.versions) {
        const percent = percents.get(app.id);
        const rollingOut = app.versions.some((other) => other.review_state === 'rolling_out');
        if (version.review_state === 'approved' && rollingOut) {
          this.context.stderr.write(
            `  ${app.id} ${version.version} is approved: release it once the rollout under way has ended (\`svc rollout complete|rollback ${app.id}\`).\n`,
          );
        } else if (version.review_state === 'approved') {
          this.context.stderr.write(
            `  ${app.id} ${version.version} is approved: release it with \`svc release ${app.id} ${version.version}\` (--rollout <percent> for a staged rollout).\n`,
          );
        } else if (version.review_state === 'rolling_out') {
          const at = percent === undefined ? '' : ` (${percent} of the cars)`;
          this.context.stderr.write(
            `  ${app.id} ${version.version} is rolling out${at}: follow it with \`svc rollout status ${app.id}\`.\n`,
          );
        }
      }
    }
  }
}
