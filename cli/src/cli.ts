/** The `svc` command line: which commands exist, and how a run ends (exit codes). */
import { Builtins, Cli } from 'clipanion';
import { BaseCommand } from './base-command.ts';
import { DevCommand } from './commands/dev.ts';
import { HelpCommand } from './commands/help.ts';
import { KeysAddCommand } from './commands/keys/add.ts';
import { KeysCommand } from './commands/keys/index.ts';
import { KeysListCommand } from './commands/keys/list.ts';
import { KeysRemoveCommand } from './commands/keys/remove.ts';
import { LoginCommand } from './commands/login.ts';
import { LogoutCommand } from './commands/logout.ts';
import { PublishCommand } from './commands/publish.ts';
import { ReleaseCommand } from './commands/release.ts';
import { RolloutCompleteCommand } from './commands/rollout/complete.ts';
import { RolloutCommand } from './commands/rollout/index.ts';
import { RolloutPauseCommand } from './commands/rollout/pause.ts';
import { RolloutResumeCommand } from './commands/rollout/resume.ts';
import { RolloutRollbackCommand } from './commands/rollout/rollback.ts';
import { RolloutSetCommand } from './commands/rollout/set.ts';
import { RolloutStatusCommand } from './commands/rollout/status.ts';
import { StatusCommand } from './commands/status.ts';
import { UpgradeCommand } from './commands/upgrade.ts';
import { WhoamiCommand } from './commands/whoami.ts';
import { WithdrawCommand } from './commands/withdraw.ts';
import type { SvcContext } from './context.ts';
import { ExitCode } from './errors.ts';
import { cliVersion } from './version.ts';

/** What each option's value is, for usage lines (clipanion 3 writes every value as `#0`). */
const placeholders: Record<string, string> = {
  '--allow-origin': '<origin>',
  '--api-url': '<url>',
  '--brands': '<brand,…>',
  '--car': '<device_id>',
  '--key': '<path>',
  '--locale': '<tag>',
  '--passphrase': '<passphrase>',
  '--port': '<n>',
  '--rollout': '<percent>',
  '--title': '<title>',
};

function withPlaceholders(text: string): string {
  const named = text.replace(
    /(--[a-z-]+) #0/g,
    (_, name: string) => `${name} ${placeholders[name] ?? '<value>'}`,
  );
  // The detailed option list was aligned for `#0`: align it again for the longer names.
  const optionLine = /^ {2}(-\S.*?) {2,}(\S.*)$/;
  const lines = named.split('\n');
  const width = Math.max(0, ...lines.map((line) => optionLine.exec(line)?.[1]?.length ?? 0));
  return lines
    .map((line) => {
      const match = optionLine.exec(line);
      return match ? `  ${match[1]?.padEnd(width + 4)}${match[2]}` : line;
    })
    .join('\n');
}

class SvcCli extends Cli<SvcContext> {
  override usage(...args: Parameters<Cli<SvcContext>['usage']>): string {
    return withPlaceholders(super.usage(...args));
  }

  override error(...args: Parameters<Cli<SvcContext>['error']>): string {
    return withPlaceholders(super.error(...args));
  }
}

/** The command the words of `argv` name (the longest match), whatever else the line holds. */
function namedCommand(cli: Cli<SvcContext>, argv: string[]) {
  const words = argv.filter((word) => !word.startsWith('-'));
  return cli
    .definitions()
    .map((definition) => ({ definition, path: definition.path.split(' ').slice(1) }))
    .filter(({ path }) => path.length > 0 && path.every((word, i) => words[i] === word))
    .sort((a, b) => b.path.length - a.path.length)[0];
}

/** Every name a command's options go by: `--port`, `-h`, … */
function optionNames(definition: ReturnType<Cli<SvcContext>['definitions']>[number]): string[] {
  return definition.options.flatMap((o) => o.definition.split(/[ ,]/).filter((n) => n.startsWith('-')));
}

/**
 * A mistyped option, said as a person would: which command has no such option, the one that was
 * likely meant, and where to read the rest (clipanion lists every command that does not have it).
 */
function unknownOptionMessage(cli: Cli<SvcContext>, argv: string[], message: string): string | undefined {
  const option = /Unsupported option name \("([^"]+)"\)/.exec(message)?.[1];
  if (!option) return undefined;
  const command = namedCommand(cli, argv);
  if (!command) return `svc: there is no option ${option}: run \`svc --help\` to see the commands.\n`;
  const name = `svc ${command.path.join(' ')}`;
  const names = optionNames(command.definition);
  const likely = names.find((candidate) => closeEnough(option, candidate));
  return (
    `svc: ${name} has no option ${option}${likely ? `: did you mean ${likely}?` : '.'} ` +
    `Run \`${name} --help\` to see its options.\n`
  );
}

/**
 * A word too many or too few, said with the command it was for: a mistyped subcommand
 * (`svc keys lst`) gets the subcommand likely meant, a missing argument gets the usage line.
 */
function positionalMessage(
  cli: Cli<SvcContext>,
  argv: string[],
  failure: Error,
  colored: boolean,
): string | undefined {
  const extra = /Extraneous positional argument \("([^"]*)"\)/.exec(failure.message)?.[1];
  const missing = /Not enough positional arguments/.test(failure.message);
  if (extra === undefined && !missing) return undefined;
  const words = argv.filter((word) => !word.startsWith('-'));
  const definitions = cli.definitions().map((definition) => ({
    definition,
    path: definition.path.split(' ').slice(1),
  }));
  const command = definitions
    .filter(({ path }) => path.every((word, i) => words[i] === word))
    .sort((a, b) => b.path.length - a.path.length)[0];
  if (!command) return undefined;
  const name = ['svc', ...command.path].join(' ');
  if (missing) {
    // clipanion's own usage line, with the options as our help writes them.
    const usage = cli.error(failure, { colored }).trim().split('\n').at(-1) ?? '';
    return `svc: ${name} is missing an argument.\n${usage}\nRun \`${name} --help\` for what it takes.\n`;
  }
  const subcommands = definitions
    .filter(
      ({ path }) => path.length === command.path.length + 1 && command.path.every((w, i) => path[i] === w),
    )
    .map(({ path }) => path.at(-1) ?? '');
  if (subcommands.length > 0) {
    const likely = subcommands.find((candidate) => closeEnough(extra ?? '', candidate));
    return (
      `svc: ${name} has no command "${extra}"${likely ? `: did you mean ${name} ${likely}?` : '.'} ` +
      `Run \`${name}\` to see its commands.\n`
    );
  }
  return `svc: ${name} takes no argument "${extra}". Run \`${name} --help\` to see what it takes.\n`;
}

/**
 * A command line with a folder and a mistyped option, or a word too many (`svc dev app --bogus`,
 * `svc publish a b`): clipanion then finds no command at all and offers the same usage line twice.
 * Said as for the mistake alone.
 */
function commandNotFoundMessage(cli: Cli<SvcContext>, argv: string[], message: string): string | undefined {
  if (!/Command not found/.test(message)) return undefined;
  const command = namedCommand(cli, argv);
  if (!command) return undefined;
  const names = optionNames(command.definition);
  const unknown = argv.find((word) => word.startsWith('-') && !names.includes(word.split('=')[0] ?? word));
  if (unknown) return unknownOptionMessage(cli, argv, `Unsupported option name ("${unknown.split('=')[0]}")`);
  const name = ['svc', ...command.path].join(' ');
  return `svc: ${name} did not understand "${argv.slice(command.path.length).join(' ')}": it takes one folder at most. Run \`${name} --help\` to see what it takes.\n`;
}

/** Within two edits (Levenshtein), or one is the start of the other: `--dryrun` is `--dry-run`. */
function closeEnough(typed: string, candidate: string): boolean {
  if (candidate.startsWith(typed) || typed.startsWith(candidate)) return true;
  const previous = Array.from({ length: candidate.length + 1 }, (_, i) => i);
  for (let i = 1; i <= typed.length; i += 1) {
    let diagonal = previous[0] ?? 0;
    previous[0] = i;
    for (let j = 1; j <= candidate.length; j += 1) {
      const above = previous[j] ?? 0;
      const cost = typed[i - 1] === candidate[j - 1] ? 0 : 1;
      previous[j] = Math.min(above + 1, (previous[j - 1] ?? 0) + 1, diagonal + cost);
      diagonal = above;
    }
  }
  return (previous[candidate.length] ?? Number.POSITIVE_INFINITY) <= 2;
}

export function createCli(colors: boolean): Cli<SvcContext> {
  const cli = new SvcCli({
    binaryLabel: 'svc — mini-apps for vehicles',
    binaryName: 'svc',
    binaryVersion: cliVersion,
    enableColors: colors,
    enableCapture: false,
  });
  for (const command of [
    LoginCommand,
    WhoamiCommand,
    LogoutCommand,
    PublishCommand,
    StatusCommand,
    ReleaseCommand,
    WithdrawCommand,
    RolloutCommand,
    RolloutStatusCommand,
    RolloutSetCommand,
    RolloutPauseCommand,
    RolloutResumeCommand,
    RolloutCompleteCommand,
    RolloutRollbackCommand,
    DevCommand,
    KeysCommand,
    KeysListCommand,
    KeysAddCommand,
    KeysRemoveCommand,
    UpgradeCommand,
    HelpCommand,
    Builtins.VersionCommand,
  ]) {
    cli.register(command);
  }
  return cli;
}

/** Runs one command line; resolves to the exit code (0 ok, 1 failure, 2 usage, 4 sign-in needed). */
export async function runCli(argv: string[], context: SvcContext): Promise<number> {
  const colors = !context.env.NO_COLOR && context.colorDepth > 1;
  const cli = createCli(colors);
  let command: ReturnType<typeof cli.process>;
  try {
    command = cli.process(argv, context);
  } catch (error) {
    const failure = error instanceof Error ? error : new Error(String(error));
    context.stderr.write(
      unknownOptionMessage(cli, argv, failure.message) ??
        positionalMessage(cli, argv, failure, colors) ??
        commandNotFoundMessage(cli, argv, failure.message) ??
        cli.error(failure, { colored: colors }),
    );
    return ExitCode.usage;
  }
  const code = await cli.run(command, context);
  return command instanceof BaseCommand && command.failure !== undefined ? command.failure : code;
}
