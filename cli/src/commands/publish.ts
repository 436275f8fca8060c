import { Command, Option } from 'clipanion';
import { DataCommand } from '../base-command.ts';

export class PublishCommand extends DataCommand {
  static override paths = [['publish']];

  static override usage = Command.Usage({
    description: 'check, pack, upload and submit a mini-app for review',
    details: `
      Checks \`manifest.json\`, packs the folder into a \`.tar.gz\` (leaving out \`.git\`, \`node_modules\` and what \`.svcignore\` lists; the same folder always gives the same sha256), uploads it to a presigned URL and submits it. The new version starts in review state \`submitted\`; follow it with \`svc status\`.
    `,
    examples: [
      ['Publish the app in this folder', 'svc publish'],
      ['See what would be sent, and send nothing', 'svc publish examples/hello-car --dry-run'],
      ['Publish and print the result as JSON', 'svc publish --json'],
    ],
  });

  dryRun = Option.Boolean('--dry-run', false, {
    description: 'Check and pack only: list the files, sizes and sha256',
  });
  dir = Option.String({ name: 'dir', required: false });

  async execute(): Promise<number> {
    const { stdout } = this.context;
    const dir = this.dir ?? '.';
    if (this.dryRun) {
      const { preparePackage } = await import('../publish/publish-steps.ts');
      const { checkLimits, dryRunLimits } = await import('../publish/limits.ts');
      const { summary, packed } = await preparePackage(dir);
      await packed.remove();
      // Signed in or not: without a session the contract's default limits stand in.
      const { limits, note } = await dryRunLimits(await this.session({ signedIn: false }));
      if (note) this.context.stderr.write(`svc: ${note}\n`);
      checkLimits(summary, limits);
      if (this.json) {
        stdout.write(`${JSON.stringify({ dry_run: true, ...summary })}\n`);
        return 0;
      }
      const width = Math.max(...summary.files.map((file) => String(file.size).length));
      for (const file of summary.files) stdout.write(`${String(file.size).padStart(width)}  ${file.path}\n`);
      stdout.write(
        `${summary.files.length} files, ${summary.total} bytes; package ${summary.size} bytes, sha256 ${summary.sha256}\n` +
          `${summary.manifest.id} ${summary.manifest.version}: nothing was uploaded (--dry-run)\n`,
      );
      return 0;
    }
    const { publish } = await import('../publish/publish-steps.ts');
    const session = await this.session();
    const { summary, version } = await publish(session, dir, this.context);
    if (this.json) {
      stdout.write(
        `${JSON.stringify({ package: { size: summary.size, sha256: summary.sha256 }, version })}\n`,
      );
      return 0;
    }
    stdout.write(
      `Submitted ${version.app_id} ${version.version} for review: ${version.review_state} (version ${version.id})\n`,
    );
    return 0;
  }
}
