/** Semantic versions (2.0.0): parsing and precedence (§11), for mini-app versions and tool upgrades. */
import { versionPattern } from '../../generated/patterns.ts';

export interface Version {
  major: string;
  minor: string;
  patch: string;
  prerelease: string[];
}

/** A semantic version 2.0.0 (`x.y.z`, optional `-pre.release` and `+build`), or undefined. */
export function parseVersion(text: string): Version | undefined {
  const match = versionPattern.exec(text);
  if (!match) return undefined;
  const [, major = '', minor = '', patch = '', prerelease] = match;
  return { major, minor, patch, prerelease: prerelease ? prerelease.split('.') : [] };
}

/** Negative, zero or positive as `a` has lower, equal or higher precedence than `b` (semver §11). */
export function compareVersions(a: string, b: string): number {
  const left = parseVersion(a);
  const right = parseVersion(b);
  if (!left || !right) throw new Error(`not a semantic version: ${left ? b : a}`);
  const core =
    compareNumeric(left.major, right.major) ||
    compareNumeric(left.minor, right.minor) ||
    compareNumeric(left.patch, right.patch);
  if (core !== 0) return core;
  // A release outranks its pre-releases.
  if (left.prerelease.length === 0 || right.prerelease.length === 0) {
    return Math.sign(right.prerelease.length - left.prerelease.length);
  }
  for (let i = 0; i < Math.min(left.prerelease.length, right.prerelease.length); i++) {
    const order = compareIdentifier(left.prerelease[i] ?? '', right.prerelease[i] ?? '');
    if (order !== 0) return order;
  }
  return Math.sign(left.prerelease.length - right.prerelease.length);
}

/** Digit strings without leading zeros, compared by length first so no size overflows a number. */
function compareNumeric(a: string, b: string): number {
  return Math.sign(a.length - b.length) || (a < b ? -1 : a > b ? 1 : 0);
}

function compareIdentifier(a: string, b: string): number {
  const aNumeric = /^\d+$/.test(a);
  const bNumeric = /^\d+$/.test(b);
  if (aNumeric && bNumeric) return compareNumeric(a, b);
  if (aNumeric !== bNumeric) return aNumeric ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}
