/**
 * The review states of a mini-app version and who may move it where (DESIGN.md §8): the one
 * place these rules live. Any other move is a conflict; the right move by the wrong party is
 * forbidden.
 */
import type { components } from '../../../generated/openapi.ts';
import { ConflictError, ForbiddenError, InvalidError } from '../errors.ts';

export type ReviewState = components['schemas']['ReviewState'];

/** Who asks for a move: an admin, the developer who owns the app, or the service itself. */
export type Party = 'admin' | 'owner' | 'system';

export interface ReviewMove {
  from: readonly ReviewState[];
  to: ReviewState;
  by: Party;
  reasonRequired: boolean;
}

export const reviewMoves: readonly ReviewMove[] = [
  { from: ['submitted'], to: 'in_review', by: 'admin', reasonRequired: false },
  { from: ['submitted', 'in_review'], to: 'withdrawn', by: 'owner', reasonRequired: false },
  { from: ['in_review'], to: 'approved', by: 'admin', reasonRequired: false },
  { from: ['in_review'], to: 'rejected', by: 'admin', reasonRequired: true },
  { from: ['approved'], to: 'published', by: 'owner', reasonRequired: false },
  // A staged rollout (rollout-service.ts): the version reaches the rollout's share of the cars.
  { from: ['approved'], to: 'rolling_out', by: 'owner', reasonRequired: false },
  { from: ['rolling_out'], to: 'published', by: 'system', reasonRequired: false },
  { from: ['rolling_out'], to: 'rolled_back', by: 'system', reasonRequired: false },
  { from: ['published'], to: 'superseded', by: 'system', reasonRequired: false },
  { from: ['published'], to: 'removed', by: 'admin', reasonRequired: true },
];

/** The state a new version starts in. */
export const initialReviewState: ReviewState = 'submitted';

export function findMove(from: ReviewState, to: ReviewState): ReviewMove | undefined {
  return reviewMoves.find((move) => move.to === to && move.from.includes(from));
}

/**
 * Checks that `parties` (what the caller is for this version: admin, owner, both or neither)
 * may move it from `from` to `to`; returns the move, or throws a ConflictError, ForbiddenError or
 * InvalidError (a reason missing).
 */
export function checkMove(
  from: ReviewState,
  to: ReviewState,
  parties: ReadonlySet<Party>,
  reason: string | undefined,
): ReviewMove {
  const move = findMove(from, to);
  if (!move) {
    const allowed = reviewMoves.filter((m) => m.from.includes(from) && m.by !== 'system').map((m) => m.to);
    throw new ConflictError(
      'move_not_allowed',
      `A version in ${from} cannot move to ${to}${allowed.length ? `; from ${from} it can move to ${allowed.join(', ')}` : ''}.`,
    );
  }
  if (!parties.has(move.by)) {
    const who = { admin: 'an admin', owner: "the app's developer", system: 'the service itself' }[move.by];
    throw new ForbiddenError('not_your_move', `Only ${who} may move a version from ${from} to ${to}.`);
  }
  if (move.reasonRequired && !reason?.trim()) {
    throw new InvalidError(
      'reason_required',
      `Moving a version to ${to} needs a reason, which the developer sees.`,
    );
  }
  return move;
}
