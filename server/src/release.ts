/**
 * The service's release: `server/package.json`'s version, the one version a release bumps. The
 * production build inlines it, so a built service reports the release it was built from.
 */
import serverPackage from '../package.json' with { type: 'json' };

export const release: string = serverPackage.version;

/**
 * Orders two releases (`major.minor.patch`, a pre-release suffix ignored): negative when `a` is
 * older than `b`, zero when the same, positive when newer.
 */
export function compareReleases(a: string, b: string): number {
  const parts = (version: string) =>
    (version.split(/[-+]/)[0] ?? '').split('.').map((part) => Number(part) || 0);
  const [left, right] = [parts(a), parts(b)];
  for (let i = 0; i < 3; i += 1) {
    const difference = (left[i] ?? 0) - (right[i] ?? 0);
    if (difference !== 0) return difference;
  }
  return 0;
}
