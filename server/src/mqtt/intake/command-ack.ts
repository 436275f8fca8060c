/** `cmd/ack`: the car says what became of one of its commands, which moves on as it says. */
import type { Handler } from '../dispatch.ts';
import type { IntakeServices } from './services.ts';

export function commandAckIntake({ carReports, commands }: IntakeServices): Handler<'cmd/ack'> {
  return async (deviceId, ack, seenAt) => {
    // A car's acknowledgement is a sighting like any of its messages; the commands ask nothing of
    // cars, so a car not provisioned is found by the sighting. The two writes go at once (a
    // command's round trip waited for both in turn, bench:fleet): a car not provisioned has no
    // command to move, its acknowledgement changes nothing.
    const [known, handled] = await Promise.all([
      carReports.sighted(deviceId, seenAt),
      commands.acknowledge(deviceId, ack),
    ]);
    return known ? handled : 'unknown_car';
  };
}
