/** Tools older than 5.6.0 cannot sign in with an SSH key: they are told to upgrade, whatever they ask. */
import type { NextFunction, Request, Response } from 'express';
import { ProblemError } from './problem.ts';

export const minimumCliVersion = [5, 6, 0] as const;

/** The version in `User-Agent: svc-cli/<version>`, when the caller is our CLI. */
export function cliVersionOf(userAgent: string | undefined): [number, number, number] | undefined {
  const match = /(?:^|\s)svc-cli\/(\d+)\.(\d+)\.(\d+)/.exec(userAgent ?? '');
  return match ? [Number(match[1]), Number(match[2]), Number(match[3])] : undefined;
}

export function isOlderThanMinimum(version: readonly number[]): boolean {
  for (let i = 0; i < minimumCliVersion.length; i++) {
    const part = version[i] ?? 0;
    const minimum = minimumCliVersion[i] ?? 0;
    if (part !== minimum) return part < minimum;
  }
  return false;
}

export function requireCurrentCli(req: Request, _res: Response, next: NextFunction): void {
  const version = cliVersionOf(req.get('user-agent'));
  if (version && isOlderThanMinimum(version)) {
    throw new ProblemError(
      426,
      'upgrade_required',
      `svc ${version.join('.')} is too old for this service: run \`svc upgrade\` (${minimumCliVersion.join('.')} or later signs in with your SSH key).`,
      { title: 'Upgrade required' },
    );
  }
  next();
}
