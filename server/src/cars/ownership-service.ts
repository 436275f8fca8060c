/**
 * Ending and moving a car's ownership: unpair (its owner or an admin) and transfer (its owner
 * only). Each reads the car with its row locked and changes it in the same transaction, so two
 * changes at once happen one after the other, the second seeing what the first did. Pairing, which
 * makes an owner, proves presence in the car and lives with the commands.
 */

import { findAccountById } from '../accounts/account-repository.ts';
import type { Principal } from '../auth/principal.ts';
import type { Clock } from '../clock.ts';
import type { CommandLifecycle } from '../commands/command-lifecycle.ts';
import type { ParsedDeviceId } from '../device-id.ts';
import { ConflictError, ForbiddenError, InvalidError } from '../errors.ts';
import type { Db } from '../store/db.ts';
import { findCarForUpdate, setCarOwner } from './car-repository.ts';
import { type Car, toApiCar } from './car-service.ts';
import { visibleCar } from './car-visibility.ts';

export function createOwnershipService(deps: { db: Db; clock: Clock; commands: CommandLifecycle }) {
  const { db, clock, commands } = deps;

  /** Moves the car from `from` to `to` (null: unpaired) and ends what `from` asked of it, in the caller's transaction. */
  async function changeOwner(trx: Db, deviceId: string, from: string, to: string | null): Promise<Car> {
    const at = clock();
    // Withdrawn first, while the car is still `from`'s: they hear of their own commands' end.
    await commands.withdrawOwnersCommands(trx, deviceId, from);
    const car = await setCarOwner(trx, deviceId, { owner_id: to, paired_at: to === null ? null : at });
    return toApiCar(car);
  }

  return {
    /** The car without owner; 409 `car_not_paired` when it has none. */
    async unpair(principal: Principal, { deviceId }: ParsedDeviceId): Promise<Car> {
      return db.transaction(async (trx) => {
        const row = visibleCar(principal, deviceId, await findCarForUpdate(trx, deviceId));
        if (row.owner_id === null) {
          throw new ConflictError('car_not_paired', `The car ${deviceId} is not paired with anyone.`);
        }
        return changeOwner(trx, deviceId, row.owner_id, null);
      });
    },

    /**
     * The car, now `toUser`'s, paired from now on. An admin who is not the owner is refused: moving
     * a car to someone is its owner's choice; an admin ends a pairing with unpair instead.
     */
    async transfer(principal: Principal, { deviceId }: ParsedDeviceId, toUser: string): Promise<Car> {
      return db.transaction(async (trx) => {
        const row = visibleCar(principal, deviceId, await findCarForUpdate(trx, deviceId));
        if (row.owner_id === null) {
          throw new ConflictError(
            'car_not_paired',
            `The car ${deviceId} is not paired with anyone: its new owner pairs it with the code it shows (POST …/pair).`,
          );
        }
        if (row.owner_id !== principal.accountId) {
          throw new ForbiddenError(
            'not_owner',
            `Only the owner of ${deviceId} may transfer it; an admin may unpair it instead (POST …/unpair).`,
          );
        }
        // Account ids are UUIDs, which the store compares in any case: so must this.
        if (toUser.toLowerCase() === principal.accountId.toLowerCase()) return toApiCar(row);
        if (!(await findAccountById(trx, toUser))) {
          throw new InvalidError(
            'unknown_account',
            `No account has the id ${toUser}: ask the new owner for their account id (GET /api/v1/dev/me shows it).`,
          );
        }
        return changeOwner(trx, deviceId, principal.accountId, toUser);
      });
    },
  };
}

export type OwnershipService = ReturnType<typeof createOwnershipService>;
