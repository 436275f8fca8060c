/**
 * What each message a car sends means: one handler per topic suffix the service receives, each a
 * few lines calling the services of cars/ and commands/ (never their repositories). The dispatch
 * (dispatch.ts) reads the message, runs its handler and counts what it says it did.
 */
import type { Handlers } from '../dispatch.ts';
import { commandAckIntake } from './command-ack.ts';
import { presenceIntake } from './presence.ts';
import type { IntakeServices } from './services.ts';
import { statusIntake } from './status.ts';
import { telemetryIntake } from './telemetry.ts';

export type { CommandIntake, IntakeServices } from './services.ts';

export function createIntake(services: IntakeServices): Handlers {
  return {
    status: statusIntake(services),
    telemetry: telemetryIntake(services),
    presence: presenceIntake(services),
    'cmd/ack': commandAckIntake(services),
  };
}
