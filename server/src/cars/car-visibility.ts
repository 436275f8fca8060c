/**
 * Who may see a car: its owner and admins. To anyone else a car they may not see is one that does
 * not exist (a VIN is printed on the windshield: existence must not leak), so both are the same
 * 404. Every vehicle route that names a car asks here.
 */
import type { Principal } from '../auth/principal.ts';
import { NotFoundError } from '../errors.ts';

export function maySeeCar(principal: Principal, car: { owner_id: string | null }): boolean {
  return principal.isAdmin || car.owner_id === principal.accountId;
}

/** The car, when the caller may see it; else the 404 of a car that does not exist. */
export function visibleCar<Row extends { owner_id: string | null }>(
  principal: Principal,
  deviceId: string,
  row: Row | undefined,
): Row {
  if (!row || !maySeeCar(principal, row)) {
    throw new NotFoundError('car_not_found', `No car ${deviceId} is provisioned, or you may not see it.`);
  }
  return row;
}
