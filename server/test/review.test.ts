import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import type { components } from '../../generated/openapi.ts';
import { DomainError } from '../src/errors.ts';
import { problemFor } from '../src/http/problem.ts';
import { checkMove, type Party, type ReviewState, reviewMoves } from '../src/mini-apps/review.ts';

// Every state, from the contract's ReviewState enum.
const states: ReviewState[] = [
  'submitted',
  'in_review',
  'approved',
  'rejected',
  'published',
  'rolling_out',
  'rolled_back',
  'withdrawn',
  'superseded',
  'removed',
] satisfies components['schemas']['ReviewState'][];

// DESIGN.md §8, written out again on purpose: the test holds the table, the module must match it.
const allowed: [from: ReviewState, to: ReviewState, by: Party, reason: boolean][] = [
  ['submitted', 'in_review', 'admin', false],
  ['submitted', 'withdrawn', 'owner', false],
  ['in_review', 'withdrawn', 'owner', false],
  ['in_review', 'approved', 'admin', false],
  ['in_review', 'rejected', 'admin', true],
  ['approved', 'published', 'owner', false],
  ['approved', 'rolling_out', 'owner', false],
  ['rolling_out', 'published', 'system', false],
  ['rolling_out', 'rolled_back', 'system', false],
  ['published', 'superseded', 'system', false],
  ['published', 'removed', 'admin', true],
];
const parties: Party[] = ['admin', 'owner', 'system'];

function refusal(run: () => unknown): { status: number; code: string } | undefined {
  try {
    run();
    return undefined;
  } catch (error) {
    assert.ok(error instanceof DomainError, String(error));
    const problem = problemFor(error);
    assert.ok(problem);
    return { status: problem.status, code: problem.code };
  }
}

describe('review moves', () => {
  test('when the module is read then it has exactly the moves of the table', () => {
    const moves = reviewMoves.flatMap((move) =>
      move.from.map((from) => [from, move.to, move.by, move.reasonRequired]),
    );
    assert.deepEqual(moves.sort(), [...allowed].sort());
  });

  for (const [from, to, by, reasonRequired] of allowed) {
    test(`when ${by} moves ${from} → ${to} then it is allowed`, () => {
      assert.equal(
        refusal(() => checkMove(from, to, new Set([by]), 'a reason')),
        undefined,
      );
    });
    for (const wrong of parties.filter((party) => party !== by)) {
      test(`when ${wrong} moves ${from} → ${to} then 403`, () => {
        assert.deepEqual(
          refusal(() => checkMove(from, to, new Set([wrong]), 'a reason')),
          {
            status: 403,
            code: 'not_your_move',
          },
        );
      });
    }
    if (reasonRequired) {
      for (const reason of [undefined, '', '   ']) {
        test(`when ${by} moves ${from} → ${to} with reason ${JSON.stringify(reason)} then 422`, () => {
          assert.deepEqual(
            refusal(() => checkMove(from, to, new Set([by]), reason)),
            {
              status: 422,
              code: 'reason_required',
            },
          );
        });
      }
    }
  }

  for (const from of states) {
    for (const to of states) {
      if (allowed.some(([f, t]) => f === from && t === to)) continue;
      test(`when anyone moves ${from} → ${to} then 409`, () => {
        assert.deepEqual(
          refusal(() => checkMove(from, to, new Set(parties), 'a reason')),
          {
            status: 409,
            code: 'move_not_allowed',
          },
        );
      });
    }
  }

  test('when an admin owns the app then both parties count', () => {
    assert.equal(
      refusal(() => checkMove('approved', 'published', new Set<Party>(['admin', 'owner']), undefined)),
      undefined,
    );
    assert.equal(
      refusal(() => checkMove('submitted', 'in_review', new Set<Party>(['admin', 'owner']), undefined)),
      undefined,
    );
  });
});
