/** How `svc` fails: a message for a person, and a stable exit code for scripts. */
export const ExitCode = {
  success: 0,
  failure: 1,
  usage: 2,
  authenticationNeeded: 4,
  /** Ctrl-C: 128 + SIGINT, as shells report it. */
  cancelled: 130,
} as const;

/** A failure the user can act on: printed as `svc: <message>`, no stack. */
export class CliError extends Error {
  override readonly name = 'CliError';
  readonly exitCode: number;

  constructor(message: string, exitCode: number = ExitCode.failure) {
    super(message);
    this.exitCode = exitCode;
  }
}

/** The user pressed Ctrl-C: nothing more to say than what `message` adds (may be empty). */
export class Cancelled extends CliError {
  constructor(message = '') {
    super(message, ExitCode.cancelled);
  }
}

/** No usable credential: the fix is always to sign in. */
export class AuthenticationNeeded extends CliError {
  constructor(message = 'Your session has expired or is not valid: run `svc login`.') {
    super(message, ExitCode.authenticationNeeded);
  }
}
