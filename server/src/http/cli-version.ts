/** Tools older than 5.6.0 cannot sign in with an SSH key: they are told to upgrade, whatever they ask. */
import { compareVersions, parseVersion } from '@svc/sdk';
import type { NextFunction, Request, Response } from 'express';
import { ProblemError } from './problem.ts';

export const minimumCliVersion = '5.6.0';

/** The version in `User-Agent: svc-cli/<version>`, when the caller is our CLI. */
export function cliVersionOf(userAgent: string | undefined): string | undefined {
  const version = /(?:^|\s)svc-cli\/(\S+)/.exec(userAgent ?? '')?.[1];
  return version && parseVersion(version) ? version : undefined;
}

export function requireCurrentCli(req: Request, _res: Response, next: NextFunction): void {
  const version = cliVersionOf(req.get('user-agent'));
  if (version && compareVersions(version, minimumCliVersion) < 0) {
    throw new ProblemError(
      426,
      'upgrade_required',
      `svc ${version} is too old for this service: run \`svc upgrade\` (${minimumCliVersion} or later signs in with your SSH key).`,
      { title: 'Upgrade required' },
    );
  }
  next();
}
