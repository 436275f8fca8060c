import { Command } from 'clipanion';
import { BaseCommand } from '../base-command.ts';

export class UpgradeCommand extends BaseCommand {
  static override paths = [['upgrade']];

  static override usage = Command.Usage({
    description: 'install the newest svc from your npm registry',
    details: `
      Asks your npm for the newest \`@svc/cli\` and, when this copy is a global npm install, installs it over this copy. Any other copy (a project's, npx's, a checkout) is left alone: svc prints the exact command to run instead.
    `,
    examples: [['Upgrade', 'svc upgrade']],
  });

  async execute(): Promise<number> {
    const { upgrade, UpgradeError } = await import('../global-upgrade.ts');
    const { cliVersion } = await import('../version.ts');
    const { CliError } = await import('../errors.ts');
    const { stdout, stderr, env } = this.context;
    const result = await upgrade({
      packageName: '@svc/cli',
      currentVersion: cliVersion,
      installedAt: process.argv[1] ?? '',
      env,
      log: (message) => stderr.write(`${message}\n`),
    }).catch((error: unknown) => {
      // Where running npm by hand would help, the message ends with the exact command.
      if (error instanceof UpgradeError) throw new CliError(error.message);
      throw error;
    });
    if (result.status === 'up-to-date') stdout.write(`svc ${result.version} is the newest version.\n`);
    if (result.status === 'upgraded') stdout.write(`Upgraded svc from ${result.from} to ${result.to}.\n`);
    if (result.status === 'manual') {
      stdout.write(
        `svc ${result.to} is out (you have ${result.from}). ${result.reason}\nRun: ${result.command}\n`,
      );
    }
    return 0;
  }
}
