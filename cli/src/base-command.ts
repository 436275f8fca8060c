/**
 * Options every command shares, and one place that turns failures into messages and exit codes.
 * Kept free of heavy imports: a command's real work is loaded only when it runs.
 */
import { Command, Option, UsageError } from 'clipanion';
import type { SvcContext } from './context.ts';
import { CliError, ExitCode } from './errors.ts';
import type { Session } from './session.ts';

export abstract class BaseCommand extends Command<SvcContext> {
  /** Set by `catch` when the command failed; the runner turns it into the exit code. */
  failure: number | undefined;

  override async catch(error: unknown): Promise<void> {
    const { stderr, env } = this.context;
    if (error instanceof CliError) {
      this.failure = error.exitCode;
      if (error.message) stderr.write(`svc: ${error.message}\n`);
    } else if (error instanceof UsageError) {
      this.failure = ExitCode.usage;
      stderr.write(`svc: ${error.message}\n`);
    } else {
      this.failure = ExitCode.failure;
      const detail = error instanceof Error ? error.message : String(error);
      stderr.write(`svc: something went wrong: ${detail}\n`);
      if (env.SVC_DEBUG && error instanceof Error && error.stack) stderr.write(`${error.stack}\n`);
    }
  }
}

/** Commands that talk to a service take `--api-url`, and open their session here. */
export abstract class ServiceCommand extends BaseCommand {
  apiUrl = Option.String('--api-url', {
    description: 'The svc service to talk to (default: $SVC_API_URL, else where you last signed in)',
  });

  /**
   * The connection to the service (`--api-url`, SVC_API_URL or where the token is from). Signed in
   * unless `signedIn: false`: without a token for that service the command ends with exit 4
   * before any request.
   */
  protected async session({ signedIn = true }: { signedIn?: boolean } = {}): Promise<Session> {
    const { openSession, requireToken } = await import('./session.ts');
    const session = await openSession(this.context, this.apiUrl);
    if (signedIn) requireToken(session);
    return session;
  }
}

/** Commands that print data take `--json`: one JSON document on stdout and nothing else there. */
export abstract class DataCommand extends ServiceCommand {
  json = Option.Boolean('--json', false, { description: 'Print one JSON document on stdout' });
}
