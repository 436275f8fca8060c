/** The `svc` command line: which commands exist, and how a run ends (exit codes). */
import { Builtins, Cli } from 'clipanion';
import { BaseCommand } from './base-command.ts';
import { HelpCommand } from './commands/help.ts';
import { KeysAddCommand } from './commands/keys/add.ts';
import { KeysListCommand } from './commands/keys/list.ts';
import { KeysRemoveCommand } from './commands/keys/remove.ts';
import { LoginCommand } from './commands/login.ts';
import { LogoutCommand } from './commands/logout.ts';
import { PublishCommand } from './commands/publish.ts';
import { StatusCommand } from './commands/status.ts';
import { UpgradeCommand } from './commands/upgrade.ts';
import { WhoamiCommand } from './commands/whoami.ts';
import type { SvcContext } from './context.ts';
import { ExitCode } from './errors.ts';
import { cliVersion } from './version.ts';

export function createCli(colors: boolean): Cli<SvcContext> {
  const cli = new Cli<SvcContext>({
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
    context.stderr.write(
      cli.error(error instanceof Error ? error : new Error(String(error)), { colored: colors }),
    );
    return ExitCode.usage;
  }
  const code = await cli.run(command, context);
  return command instanceof BaseCommand && command.failure !== undefined ? command.failure : code;
}
