/**
 * Operations the contract already has and this service does not offer yet (identity tokens).
 * They answer 501, as the contract says; vehicle routes check the device id
 * first, so a malformed id is the 422 it will always be.
 */
import type { OperationId } from '../../../../generated/routes.ts';
import type { Handlers } from '../bind-handlers.ts';
import { parseDeviceId } from '../device-id-param.ts';
import { ProblemError } from '../problem.ts';

function notOffered(operationId: OperationId): never {
  throw new ProblemError(501, 'not_implemented', `This service does not offer ${operationId} yet.`);
}

function vehicle(operationId: OperationId) {
  return ({ params, body }: { params: { device_id: string }; body?: { brand?: string } | unknown }) => {
    const brand = body && typeof body === 'object' && 'brand' in body ? String(body.brand) : undefined;
    parseDeviceId(params.device_id, brand);
    return notOffered(operationId);
  };
}

export function notOfferedHandlers() {
  return {
    createIdentityToken: vehicle('createIdentityToken'),
  } satisfies Partial<Handlers>;
}
