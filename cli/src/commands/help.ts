import { Command, Option } from 'clipanion';
import type { SvcContext } from '../context.ts';

/** `svc --help`: every command with its one-line description and examples, grouped as in the usage. */
export class HelpCommand extends Command<SvcContext> {
  static override paths = [Command.Default, ['-h'], ['--help'], ['help']];

  /** What follows `svc` when it matched no command. */
  words = Option.Rest();

  async execute(): Promise<number> {
    if (this.words.length > 0) {
      this.context.stderr.write(
        `svc: there is no command "${this.words.join(' ')}": run \`svc --help\` to see them all.\n`,
      );
      return 2;
    }
    const definitions = this.cli.definitions().filter((definition) => definition.description);
    const lines = [
      `${this.cli.binaryLabel} ${this.cli.binaryVersion ?? ''}`.trimEnd(),
      '',
      '  $ svc <command> [options]',
      '',
    ];
    // Clipanion keeps the trailing newline of usage texts.
    const categoryOf = (definition: { category?: string | undefined }) =>
      definition.category?.trim() ?? 'Commands';
    const categories = [...new Set(definitions.map(categoryOf))];
    // One column for every description, however long the longest command (`svc rollout rollback`).
    const width = Math.max(20, ...definitions.map((definition) => definition.path.length));
    for (const category of categories.sort((a, b) => (a === 'Commands' ? -1 : b === 'Commands' ? 1 : 0))) {
      lines.push(category, '');
      for (const definition of definitions.filter((d) => categoryOf(d) === category)) {
        lines.push(`  ${definition.path.padEnd(width)} ${definition.description?.trim()}`);
        for (const [, example] of definition.examples ?? []) lines.push(`      $ ${example}`);
        lines.push('');
      }
    }
    lines.push(
      'Options on every command: --api-url <url> (else $SVC_API_URL). Data commands take --json.',
      'Run `svc <command> --help` for the details of one command.',
      'Exit codes: 0 success, 1 failure, 2 usage, 4 sign-in needed.',
      '',
    );
    this.context.stdout.write(lines.join('\n'));
    return 0;
  }
}
