/** `telemetry`: a fix joins the telemetry batch, which stores it (and counts it) in the background. */
import type { Handler } from '../dispatch.ts';
import type { IntakeServices } from './services.ts';

export function telemetryIntake({ telemetry, clock }: IntakeServices): Handler<'telemetry'> {
  return async (deviceId, fix, seenAt) => {
    const receivedAt = (seenAt ?? clock()).toISOString();
    await telemetry.add({
      device_id: deviceId,
      recorded_at: fix.recorded_at,
      received_at: receivedAt,
      latitude: fix.location.latitude,
      longitude: fix.location.longitude,
      accuracy_m: fix.location.accuracy_m ?? null,
      heading_deg: fix.location.heading_deg ?? null,
      speed_kmh: fix.location.speed_kmh ?? null,
      odometer_km: fix.odometer_km ?? null,
      battery_percent: fix.battery_percent ?? null,
      live: seenAt !== undefined,
    });
    return 'queued';
  };
}
