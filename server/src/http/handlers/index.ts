/** Every handler of the contract, by operationId. */
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';
import { withIdempotencyKeys } from '../idempotency.ts';
import { accountHandlers } from './accounts.ts';
import { carCommandHandlers } from './car-commands.ts';
import { carOwnerHandlers } from './car-owners.ts';
import { carPairingHandlers } from './car-pairing.ts';
import { carReadHandlers } from './car-reads.ts';
import { carHandlers } from './cars.ts';
import { developerHandlers } from './developer.ts';
import { identityHandlers } from './identity.ts';
import { miniAppHandlers } from './mini-apps.ts';
import { operationHandlers } from './operations.ts';
import { rolloutHandlers } from './rollouts.ts';
import { signInHandlers } from './sign-in.ts';
import { webhookHandlers } from './webhooks.ts';

export function createHandlers(services: Services): Handlers {
  // The operations that take an Idempotency-Key answer to it, whoever's handlers they are.
  return withIdempotencyKeys(
    {
      ...operationHandlers(services),
      ...signInHandlers(services),
      ...accountHandlers(services),
      ...developerHandlers(services),
      ...miniAppHandlers(services),
      ...rolloutHandlers(services),
      ...carHandlers(services),
      ...carReadHandlers(services),
      ...carOwnerHandlers(services),
      ...carPairingHandlers(services),
      ...carCommandHandlers(services),
      ...identityHandlers(services),
      ...webhookHandlers(services),
    },
    services.idempotency,
  );
}
