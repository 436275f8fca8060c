import { Command } from 'clipanion';
import { DataCommand } from '../base-command.ts';

export class StatusCommand extends DataCommand {
  static override paths = [['status']];

  static override usage = Command.Usage({
    description: 'show your mini-apps and where each is in review',
    examples: [
      ['Your apps', 'svc status'],
      ['As JSON', 'svc status --json'],
    ],
  });

  async execute(): Promise<number> {
    const { expectOk } = await import('../session.ts');
    const { formatTable } = await import('../table.ts');
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
    const rows = apps.map((app) => {
      const latest = app.latest_version;
      const state = latest ? `${latest.review_state}${latest.reason ? ` (${latest.reason})` : ''}` : '-';
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
    return 0;
  }
}
