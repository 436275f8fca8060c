/**
 * What a package may hold: `svc publish` checks the packed package against the service's limits
 * before it uploads a byte, and `--dry-run` too, so that a package the service would refuse is
 * refused here first. Without a session the contract's defaults stand in, and svc says so.
 */
import type { components } from '@svc/sdk';
import contract from '../../../generated/openapi.json' with { type: 'json' };
import { CliError } from '../errors.ts';
import { expectOk, type Session } from '../session.ts';

export type PackageLimits = components['schemas']['PackageLimits'];

const defaults = contract.components.schemas.PackageLimits.properties;

export const defaultPackageLimits: PackageLimits = {
  max_package_bytes: defaults.max_package_bytes.default,
  max_entries: defaults.max_entries.default,
  max_unpacked_bytes: defaults.max_unpacked_bytes.default,
  max_unpacked_ratio: defaults.max_unpacked_ratio.default,
};

export async function serviceLimits(session: Session): Promise<PackageLimits> {
  return expectOk(session, session.client.GET('/api/v1/mini-apps/limits'));
}

/**
 * For a dry run: the service's limits when signed in to it, else the defaults, with a note that
 * says which were used.
 */
export async function dryRunLimits(session: Session): Promise<{ limits: PackageLimits; note?: string }> {
  if (!session.token) {
    return {
      limits: defaultPackageLimits,
      note: `not signed in to ${session.apiUrl}: checked against the default package limits (svc login to check against its own)`,
    };
  }
  try {
    return { limits: await serviceLimits(session) };
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    return { limits: defaultPackageLimits, note: `checked against the default package limits (${why})` };
  }
}

/** Refuses a package that passes any limit, naming each one and what to do. */
export function checkLimits(
  packed: { files: readonly { size: number }[]; total: number; size: number },
  limits: PackageLimits,
): void {
  const problems: string[] = [];
  if (packed.size > limits.max_package_bytes) {
    problems.push(
      `the package is ${packed.size} bytes, and a package may be at most ${limits.max_package_bytes} bytes`,
    );
  }
  if (packed.files.length > limits.max_entries) {
    problems.push(
      `it holds ${packed.files.length} files, and a package may hold at most ${limits.max_entries}`,
    );
  }
  if (packed.total > limits.max_unpacked_bytes) {
    problems.push(
      `its files take ${packed.total} bytes, and a package may unpack to at most ${limits.max_unpacked_bytes} bytes`,
    );
  } else if (packed.total > limits.max_unpacked_ratio * packed.size) {
    problems.push(
      `its files take ${packed.total} bytes, more than ${limits.max_unpacked_ratio} times the package's ${packed.size} bytes, ` +
        'which the service refuses as a possible zip bomb (long runs of zeros or repeated data compress that well)',
    );
  }
  if (problems.length > 0) {
    throw new CliError(
      `this package would be refused: ${problems.join('; ')}. Leave out what the app does not need (.svcignore lists what to skip).`,
    );
  }
}
