/**
 * The states of a command and the moves between them (DESIGN §9): the one place these rules live.
 * The service moves a command `queued → sent` once the broker took it, the car's acknowledgements
 * move it on, and expiry ends what is not final by `expires_at`. Nothing leaves a final state.
 */
import type { components } from '../../../generated/openapi.ts';

export type CommandState = components['schemas']['CommandState'];
export type AckOutcome = 'accepted' | 'completed' | 'failed' | 'rejected';

/** Not final: the car may still be sent it, and it may still move. */
export const pendingStates = ['queued', 'sent', 'accepted'] as const satisfies readonly CommandState[];

export const finalStates = [
  'completed',
  'failed',
  'rejected',
  'expired',
] as const satisfies readonly CommandState[];

/** The states a car's acknowledgement may move a command from. */
export function ackMovesFrom(outcome: AckOutcome): readonly CommandState[] {
  // `accepted` after a final outcome (acknowledgements crossing on the wire) must not reopen it.
  return outcome === 'accepted' ? ['queued', 'sent'] : pendingStates;
}

/** The command only the service sends: its argument is a secret for the people in the car. */
export const pairingCommand = 'pairing.show_code';
