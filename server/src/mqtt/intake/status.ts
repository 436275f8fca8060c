/** `status`: the car's last report (host version, installed apps, state) replaces the one kept. */
import type { Handler } from '../dispatch.ts';
import type { IntakeServices } from './services.ts';

export function statusIntake({ carReports, clock }: IntakeServices): Handler<'status'> {
  return async (deviceId, report, seenAt) => {
    const saved = await carReports.saveStatus(
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
    return saved ? 'stored' : 'unknown_car';
  };
}
