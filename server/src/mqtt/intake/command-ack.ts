/** `cmd/ack`: the car says what became of one of its commands, which moves on as it says. */
import type { Handler } from '../dispatch.ts';
import type { IntakeServices } from './services.ts';

export function commandAckIntake({ carReports, commands }: IntakeServices): Handler<'cmd/ack'> {
  return async (deviceId, ack, seenAt) => {
    // A car's acknowledgement is a sighting like any of its messages; the commands ask nothing of
    // cars, so a car not provisioned is found here.
    if (!(await carReports.sighted(deviceId, seenAt))) return 'unknown_car';
    return commands.acknowledge(deviceId, ack);
  };
}
