/**
 * The review states of a version as `svc` says them, and what a developer can do from each: the
 * contract's ReviewState names the states and their moves, this module the words.
 */
import type { components } from '@svc/sdk';
import { CliError } from './errors.ts';

type MiniAppVersion = components['schemas']['MiniAppVersion'];
type ReviewState = components['schemas']['ReviewState'];

const words: Record<ReviewState, string> = {
  submitted: 'submitted',
  in_review: 'in review',
  approved: 'approved',
  rejected: 'rejected',
  published: 'published',
  rolling_out: 'rolling out',
  rolled_back: 'rolled back',
  withdrawn: 'withdrawn',
  superseded: 'superseded',
  removed: 'removed',
};

/** `rolling out (10 %)` (or `10 %, paused`) when the rollout's share is known, else the state in words. */
export function reviewStateInWords(state: ReviewState, rolloutShare?: string): string {
  if (state === 'rolling_out' && rolloutShare !== undefined) return `rolling out (${rolloutShare})`;
  return words[state];
}

/** `com.example.hello-car 1.1.0`, as every message names a version. */
export const versionName = (version: Pick<MiniAppVersion, 'app_id' | 'version'>) =>
  `${version.app_id} ${version.version}`;

const republish = 'raise the version in manifest.json and publish it again with `svc publish`.';

/** Why `svc release` cannot move this version, and what to do instead; undefined when it can. */
export function whyNotReleasable(version: MiniAppVersion): CliError | undefined {
  const name = versionName(version);
  const reason = version.reason ? ` (${version.reason})` : '';
  const said: Partial<Record<ReviewState, string>> = {
    submitted: `${name} is submitted and waits for review: it can be released once an admin has approved it. Follow it with \`svc status\`.`,
    in_review: `${name} is in review: it can be released once an admin has approved it. Follow it with \`svc status\`.`,
    rejected: `${name} was rejected${reason}: fix it, then ${republish}`,
    published: `${name} is published already: it is the version live on cars.`,
    rolling_out: `${name} is rolling out already: see \`svc rollout status ${version.app_id}\`, and raise it with \`svc rollout set <percent> ${version.app_id}\`.`,
    rolled_back: `${name} was rolled back and can no longer be installed: ${republish}`,
    withdrawn: `${name} was withdrawn from review: ${republish}`,
    superseded: `${name} was superseded by a newer version and cannot be released again.`,
    removed: `${name} was removed by an admin${reason} and cannot be released again: ${republish}`,
  };
  const message = said[version.review_state];
  return message ? new CliError(message) : undefined;
}

/** Why `svc withdraw` cannot take this version out of review; undefined when it can. */
export function whyNotWithdrawable(version: MiniAppVersion): CliError | undefined {
  const { review_state: state } = version;
  if (state === 'submitted' || state === 'in_review') return undefined;
  const name = versionName(version);
  const next: Partial<Record<ReviewState, string>> = {
    approved: ` It is approved: release it with \`svc release ${version.app_id} ${version.version}\`, or leave it unreleased.`,
    published: ' It is live on cars: a newer version replaces it.',
    rolling_out: ` To take it back from the cars that got it, run \`svc rollout rollback ${version.app_id}\`.`,
  };
  return new CliError(
    `${name} is ${words[state]}: only a version that is submitted or in review can be withdrawn.${next[state] ?? ''}`,
  );
}
