/**
 * Ending and moving a car's ownership: unpair (its owner or an admin) and transfer (its owner
 * only). Each reads the car with its row locked and changes it in the same transaction, so two
 * changes at once happen one after the other, the second seeing what the first did. Pairing, which
 * makes an owner, proves presence in the car and lives with the commands.
 */

import { findAccountById } from '../accounts/account-repository.ts';
import type { Principal } from '../auth/principal.ts';
import type { Clock } from '../clock.ts';
import { ConflictError, ForbiddenError, InvalidError } from '../errors.ts';
import type { Db } from '../store/db.ts';
import { findCarForUpdate, setCarOwner } from './car-repository.ts';
import { type Car, toApiCar } from './car-service.ts';
import { visibleCar } from './car-visibility.ts';

export function createOwnershipService(deps: { db: Db; clock: Clock }) {
  const { db, clock } = deps;
  return {
    /** The car without owner; 409 `car_not_paired` when it has none. */
    unpair(principal: Principal, deviceId: string): Promise<Car> {
      return db.transaction(async (trx) => {
        const row = visibleCar(principal, deviceId, await findCarForUpdate(trx, deviceId));
        if (row.owner_id === null) {
          throw new ConflictError('car_not_paired', `The car ${deviceId} is not paired with anyone.`);
        }
        return toApiCar(await setCarOwner(trx, deviceId, { owner_id: null, paired_at: null }));
      });
    },

    /**
     * The car, now `toUser`'s, paired from now on. An admin who is not the owner is refused: moving
     * a car to someone is its owner's choice; an admin ends a pairing with unpair instead.
     */
    transfer(principal: Principal, deviceId: string, toUser: string): Promise<Car> {
      return db.transaction(async (trx) => {
        const row = visibleCar(principal, deviceId, await findCarForUpdate(trx, deviceId));
        if (row.owner_id !== principal.accountId) {
          throw new ForbiddenError(
            'not_owner',
            `Only the owner of ${deviceId} may transfer it; an admin may unpair it instead (POST …/unpair).`,
          );
        }
        if (toUser === principal.accountId) return toApiCar(row);
        if (!(await findAccountById(trx, toUser))) {
          throw new InvalidError(
            'unknown_account',
            `No account has the id ${toUser}: ask the new owner for their account id (GET /api/v1/dev/me shows it).`,
          );
        }
        return toApiCar(await setCarOwner(trx, deviceId, { owner_id: toUser, paired_at: clock() }));
      });
    },
  };
}

export type OwnershipService = ReturnType<typeof createOwnershipService>;
