/**
 * Which cars a staged rollout reaches: a point in [0, 100) for each app and car, from a hash of
 * the two, so that a car once in a rollout at some percentage stays in at any higher one, every
 * replica agrees without asking the store, and the cars in one app's first tenth are not those of
 * another app's.
 */
import { createHash } from 'node:crypto';

export function cohortPoint(appId: string, deviceId: string): number {
  const digest = createHash('sha256').update(`${appId}\n${deviceId}`).digest();
  return (digest.readUInt32BE(0) / 2 ** 32) * 100;
}

export function inCohort(appId: string, deviceId: string, percent: number): boolean {
  return cohortPoint(appId, deviceId) < percent;
}
