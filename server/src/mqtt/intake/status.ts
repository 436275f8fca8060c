/** `status`: the car's newest report (host version, installed apps, state) replaces the one kept. */
import type { Handler } from '../dispatch.ts';
import type { IntakeServices } from './services.ts';

export function statusIntake({ carReports, clock }: IntakeServices): Handler<'status'> {
  return async (deviceId, report, seenAt) => {
    const written = await carReports.saveStatus(
      {
        deviceId,
        hostVersion: report.host_version,
        installedApps: report.installed_apps,
        state: report.state,
        reportedAt: report.reported_at,
        receivedAt: clock(),
      },
      seenAt,
    );
    // A report older than the one kept (by the car's own time) changes nothing.
    return written === 'stale' ? 'ignored' : written;
  };
}
