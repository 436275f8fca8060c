import { Command, Option } from 'clipanion';
import { DataCommand } from '../base-command.ts';
import { CliError, ExitCode } from '../errors.ts';

export class ReleaseCommand extends DataCommand {
  static override paths = [['release']];

  static override usage = Command.Usage({
    category: 'Review and release',
    description: 'release an approved version to the cars, all at once or as a staged rollout',
    details: `
      Moves an approved version of your app to \`published\`: every car that runs an earlier version of the app is moved to it. With \`--rollout <percent>\` it starts a staged rollout instead (review state \`rolling_out\`): only that share of the eligible cars gets the version, the same cars each time, and the version live before stays published for the others. \`--brands\` limits the rollout to cars of those brands. Follow and move a rollout with \`svc rollout\`. An app has one rollout at a time.
    `,
    examples: [
      ['Release 1.1.0 to every car', 'svc release com.example.hello-car 1.1.0'],
      ['Roll 1.1.0 out to a tenth of the cars', 'svc release com.example.hello-car 1.1.0 --rollout 10'],
      [
        'Roll it out to a quarter of the cars of two brands',
        'svc release com.example.hello-car 1.1.0 --rollout 25 --brands brand_a,brand_b',
      ],
    ],
  });

  rollout = Option.String('--rollout', {
    description: 'Start a staged rollout to this share of the eligible cars (1 to 100)',
  });
  brands = Option.String('--brands', {
    description: 'Limit the rollout to cars of these brands, separated by commas',
  });
  appId = Option.String({ name: 'app-id' });
  version = Option.String({ name: 'version' });

  async execute(): Promise<number> {
    const { checkAppId, findVersion } = await import('../app-versions.ts');
    const { parseBrands, parsePercent, brandsInWords } = await import('../rollouts.ts');
    const { versionName, whyNotReleasable } = await import('../review-states.ts');
    const { expectOk } = await import('../session.ts');
    const appId = checkAppId(this.appId);
    if (this.brands !== undefined && this.rollout === undefined) {
      throw new CliError(
        '--brands limits a staged rollout: give --rollout <percent> too (--rollout 100 --brands … releases to every car of those brands).',
        ExitCode.usage,
      );
    }
    const percent = this.rollout === undefined ? undefined : parsePercent(this.rollout, '--rollout');
    const brands = this.brands === undefined ? undefined : parseBrands(this.brands);
    const session = await this.session();
    const { app, version } = await findVersion(session, appId, this.version);
    const rolling = app.versions.find((v) => v.review_state === 'rolling_out');
    const refusal = whyNotReleasable(version);
    if (refusal) throw refusal;
    const released = await expectOk(
      session,
      session.client.POST('/api/v1/mini-apps/versions/{version_id}/transitions', {
        params: { path: { version_id: version.id } },
        body:
          percent === undefined
            ? { to: 'published' }
            : { to: 'rolling_out', rollout: { percent, ...(brands ? { brands } : {}) } },
      }),
      // One rollout an app at a time: a refusal while one is under way says where to see it.
      (problem, status) =>
        status === 409 && (rolling || /rollout/.test(problem.code))
          ? `See the rollout${rolling ? ` of ${rolling.version}` : ''}: \`svc rollout status ${appId}\`.`
          : undefined,
    );
    if (this.json) {
      this.context.stdout.write(`${JSON.stringify(released)}\n`);
      return 0;
    }
    const { stdout, stderr } = this.context;
    if (percent === undefined) {
      stdout.write(
        `Released ${versionName(released)}: published; every car that runs an earlier version is moved to it.\n`,
      );
      return 0;
    }
    const to = brandsInWords({ brands: brands ?? null });
    stdout.write(
      `Rolling out ${versionName(released)} to ${percent} % of the eligible cars (${to}): ${released.review_state}.\n`,
    );
    stderr.write(
      `  Follow it with \`svc rollout status ${appId} --watch\`; raise it with \`svc rollout set <percent> ${appId}\`.\n`,
    );
    return 0;
  }
}
