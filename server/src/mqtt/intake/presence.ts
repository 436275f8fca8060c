/** `presence`: the car is online or offline, and a car that comes online gets its commands again. */
import type { Handler } from '../dispatch.ts';
import type { IntakeServices } from './services.ts';

export function presenceIntake({ carReports, commands }: IntakeServices): Handler<'presence'> {
  return async (deviceId, presence, seenAt) => {
    const online = presence.state === 'online';
    const saved = await carReports.savePresence({ deviceId, online, at: presence.at }, seenAt);
    // A car that connects says so after subscribing to its `cmd` (the contract): what it missed
    // while away goes out again. A retained replay is no news: the bridge's own connection
    // (re)sends everything then.
    if (saved && online && seenAt) commands.carOnline(deviceId);
    return saved ? 'stored' : 'unknown_car';
  };
}
