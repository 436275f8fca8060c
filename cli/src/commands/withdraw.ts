import { Command, Option } from 'clipanion';
import { DataCommand } from '../base-command.ts';

export class WithdrawCommand extends DataCommand {
  static override paths = [['withdraw']];

  static override usage = Command.Usage({
    category: 'Review and release',
    description: 'take a version you submitted out of review',
    details: `
      Moves a version that is \`submitted\` or \`in_review\` to \`withdrawn\`: no admin reviews it any more, and it can never be released. To submit the app again, raise the version in manifest.json and run \`svc publish\`.
    `,
    examples: [
      ['Withdraw 1.2.0 from review', 'svc withdraw com.example.hello-car 1.2.0'],
      ['As JSON', 'svc withdraw com.example.hello-car 1.2.0 --json'],
    ],
  });

  appId = Option.String({ name: 'app-id' });
  version = Option.String({ name: 'version' });

  async execute(): Promise<number> {
    const { checkAppId, findVersion } = await import('../app-versions.ts');
    const { versionName, whyNotWithdrawable } = await import('../review-states.ts');
    const { expectOk } = await import('../session.ts');
    const appId = checkAppId(this.appId);
    const session = await this.session();
    const { version } = await findVersion(session, appId, this.version);
    const refusal = whyNotWithdrawable(version);
    if (refusal) throw refusal;
    const withdrawn = await expectOk(
      session,
      session.client.POST('/api/v1/mini-apps/versions/{version_id}/transitions', {
        params: { path: { version_id: version.id } },
        body: { to: 'withdrawn' },
      }),
    );
    if (this.json) {
      this.context.stdout.write(`${JSON.stringify(withdrawn)}\n`);
      return 0;
    }
    this.context.stdout.write(
      `Withdrew ${versionName(withdrawn)} from review: ${withdrawn.review_state}; it can never be released.\n`,
    );
    return 0;
  }
}
