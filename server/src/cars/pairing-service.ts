/**
 * Pairing (DESIGN §9): knowing a car's device id (printed on the windshield) is not enough to own
 * it; whoever types the code the car shows is. Asking without a code sends the car a one-time
 * code through the command outbox (`pairing.show_code`); asking with it pairs. Every request for
 * one car runs in a transaction holding the car's row, so concurrent tries take turns and a code
 * never allows more than its tries.
 */
import type { components } from '../../../generated/openapi.ts';
import type { Principal } from '../auth/principal.ts';
import type { Clock } from '../clock.ts';
import type { CommandLifecycle } from '../commands/command-lifecycle.ts';
import { type CommandState, finalStates, pairingCommand } from '../commands/command-states.ts';
import type { ParsedDeviceId } from '../device-id.ts';
import { ConflictError, InvalidError, NotFoundError, TooManyRequestsError } from '../errors.ts';
import type { Db } from '../store/db.ts';
import { type Car, toApiCar } from './car-service.ts';
import {
  hashPairingCode,
  newPairingCode,
  normalizePairingCode,
  pairingCodeDigits,
  pairingCodeMatches,
} from './pairing-code.ts';
import {
  codesMadeSince,
  deletePairingCode,
  findPairingCode,
  lockCar,
  savePairingCode,
  setOwner,
  setTriesLeft,
} from './pairing-repository.ts';

export type PairingCodeSent = components['schemas']['PairingCodeSent'];

/** How long a code is accepted, and how many tries it allows. */
export const pairingCodeTtlMs = 5 * 60 * 1000;
export const pairingCodeTries = 5;
/** At most this many codes per car in this window: 25 guesses an hour at 10^8 codes. */
export const codesPerWindow = 5;
const codeWindowMs = 60 * 60 * 1000;

export type PairingResult = { kind: 'paired'; car: Car } | { kind: 'code_sent'; sent: PairingCodeSent };

/** What a transaction decided; errors that must keep what it wrote are thrown after it commits. */
type Decision = PairingResult | { kind: 'wrong'; triesLeft: number };

const askAgain = 'ask for a new one (POST …/pair without a code)';

export function createPairingService(deps: { db: Db; clock: Clock; commands: CommandLifecycle }) {
  const { db, clock, commands } = deps;

  function codeSent(car: ParsedDeviceId, commandId: string, expiresAt: Date): PairingCodeSent {
    return {
      device_id: car.deviceId,
      brand: car.brand,
      command_id: commandId,
      expires_at: expiresAt.toISOString(),
    };
  }

  /** The car, provisioned and not another's; `paired` when the caller owns it already. */
  async function lockPairable(trx: Db, principal: Principal, deviceId: string) {
    const car = await lockCar(trx, deviceId);
    if (!car) throw new NotFoundError('car_not_found', `No car ${deviceId} is provisioned.`);
    if (car.owner_id === principal.accountId)
      return { paired: { kind: 'paired', car: toApiCar(car) } as const };
    if (car.owner_id !== null) {
      throw new ConflictError(
        'car_already_paired',
        `The car ${deviceId} is paired with another account: its owner must unpair it or transfer it to you first.`,
      );
    }
    return { paired: undefined };
  }

  /** The live code's command again, or a new code sent to the car. */
  async function askForCode(trx: Db, car: ParsedDeviceId): Promise<Decision> {
    const { deviceId } = car;
    const now = clock();
    const current = await findPairingCode(trx, deviceId);
    const refused: readonly CommandState[] = finalStates.filter((state) => state !== 'completed');
    if (
      current &&
      current.expires_at > now &&
      current.tries_left > 0 &&
      // A car that would not show the code (or never got it) needs a new one, not the same again.
      !refused.includes(current.command_state)
    ) {
      return { kind: 'code_sent', sent: codeSent(car, current.command_id, current.expires_at) };
    }
    // Each code allows a few guesses; without a bound on codes, anyone could guess on and on (and
    // fill the car's screen with codes nobody in it asked for).
    const recent = await codesMadeSince(trx, deviceId, new Date(now.getTime() - codeWindowMs));
    if (recent.length >= codesPerWindow) {
      const oldest = recent[0] as Date;
      const retryAfter = Math.max(1, Math.ceil((oldest.getTime() + codeWindowMs - now.getTime()) / 1000));
      throw new TooManyRequestsError(
        'too_many_pairing_codes',
        `The car ${deviceId} was sent ${codesPerWindow} pairing codes in the last hour: ask for another in ${Math.ceil(retryAfter / 60)} min.`,
        retryAfter,
      );
    }
    const code = newPairingCode();
    const expiresAt = new Date(now.getTime() + pairingCodeTtlMs);
    const command = await commands.enqueue(trx, {
      car,
      name: pairingCommand,
      args: { code },
      createdBy: null,
      expiresAt,
    });
    if (current) await commands.withdraw(trx, current.command_id, 'A newer pairing code replaced it.');
    const { salt, hash } = hashPairingCode(code);
    await savePairingCode(trx, {
      device_id: deviceId,
      code_hash: hash,
      salt,
      tries_left: pairingCodeTries,
      command_id: command.command_id,
      created_at: now,
      expires_at: expiresAt,
    });
    return { kind: 'code_sent', sent: codeSent(car, command.command_id, expiresAt) };
  }

  async function tryCode(trx: Db, principal: Principal, deviceId: string, typed: string): Promise<Decision> {
    const now = clock();
    const current = await findPairingCode(trx, deviceId);
    if (!current) {
      throw new InvalidError(
        'no_pairing_code',
        `No pairing code was asked for the car ${deviceId}: send the request without a code first, and the car shows one.`,
        { title: 'No pairing code' },
      );
    }
    if (current.expires_at <= now) {
      throw new InvalidError('pairing_code_expired', `The pairing code has expired: ${askAgain}.`, {
        title: 'Pairing code expired',
      });
    }
    if (current.tries_left <= 0) {
      throw new InvalidError(
        'pairing_code_spent',
        `The pairing code allowed ${pairingCodeTries} tries and they are used: ${askAgain}.`,
        { title: 'Pairing code spent' },
      );
    }
    const code = normalizePairingCode(typed);
    if (code.length !== pairingCodeDigits) {
      // Cannot be any code: a slip of the finger, which costs no try.
      throw new InvalidError(
        'wrong_pairing_code',
        `A pairing code has ${pairingCodeDigits} digits; this has ${code.length}. Type the code the car shows.`,
        {
          title: 'Wrong pairing code',
          errors: [{ path: '/body/code', message: `must have ${pairingCodeDigits} digits` }],
        },
      );
    }
    if (!pairingCodeMatches(code, { salt: current.salt, hash: current.code_hash })) {
      const triesLeft = current.tries_left - 1;
      await setTriesLeft(trx, deviceId, triesLeft);
      if (triesLeft === 0) await commands.withdraw(trx, current.command_id, 'The pairing code was spent.');
      return { kind: 'wrong', triesLeft };
    }
    // The code is gone; its command goes on (the car says it showed it, or it expires with the
    // code): typed right, it was shown.
    const car = await setOwner(trx, deviceId, principal.accountId, now);
    await deletePairingCode(trx, deviceId);
    return { kind: 'paired', car: toApiCar(car) };
  }

  return {
    /** Without `code`: the car is sent a code to show (202). With it: the caller owns the car (200). */
    async pair(principal: Principal, car: ParsedDeviceId, code: string | undefined): Promise<PairingResult> {
      const { deviceId } = car;
      const decision = await db.transaction(async (trx): Promise<Decision> => {
        const { paired } = await lockPairable(trx, principal, deviceId);
        if (paired) return paired;
        return code === undefined ? askForCode(trx, car) : tryCode(trx, principal, deviceId, code);
      });
      switch (decision.kind) {
        case 'wrong':
          throw new InvalidError(
            'wrong_pairing_code',
            decision.triesLeft > 0
              ? `That is not the code the car shows; ${decision.triesLeft} ${decision.triesLeft === 1 ? 'try is' : 'tries are'} left.`
              : `That is not the code the car shows, and it was the last try: ${askAgain}.`,
            { title: 'Wrong pairing code' },
          );
        default:
          return decision;
      }
    },
  };
}

export type PairingService = ReturnType<typeof createPairingService>;
