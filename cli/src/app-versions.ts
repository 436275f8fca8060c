/**
 * Which app and version a command line names: the app id checked before any request, the version
 * looked up among the developer's own apps (`GET /api/v1/mini-apps/mine`), which has its id.
 */
import type { components } from '@svc/sdk';
import { CliError, ExitCode } from './errors.ts';
import { expectOk, type Session } from './session.ts';

type MiniApp = components['schemas']['MiniApp'];
type MiniAppVersion = components['schemas']['MiniAppVersion'];

/** The contract's AppId pattern (openapi/components/schemas/AppId.yaml). */
const appIdPattern = /^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)+$/;

/** The app id of a command line, or exit 2 before any request. */
export function checkAppId(appId: string): string {
  if (appIdPattern.test(appId) && appId.length <= 200) return appId;
  throw new CliError(
    `"${appId}" is not an app id: app ids are reverse-DNS names such as com.example.hello-car, the \`id\` in manifest.json (see \`svc status\`).`,
    ExitCode.usage,
  );
}

const listed = (names: string[]) => (names.length > 0 ? names.join(', ') : 'none');

/** The developer's app `appId`, or a message naming the apps they do have. */
export function findApp(apps: MiniApp[], appId: string): MiniApp {
  const app = apps.find((candidate) => candidate.id === appId);
  if (app) return app;
  throw new CliError(
    apps.length === 0
      ? `you have no app ${appId}: you have no mini-apps yet; publish one with \`svc publish\`.`
      : `you have no app ${appId}: your apps are ${listed(apps.map((a) => a.id))} (see \`svc status\`).`,
  );
}

/** Version `version` of the developer's app `appId` (its id, its review state), and the app. */
export async function findVersion(
  session: Session,
  appId: string,
  version: string,
): Promise<{ app: MiniApp; version: MiniAppVersion }> {
  const { mini_apps: apps } = await expectOk(session, session.client.GET('/api/v1/mini-apps/mine'));
  const app = findApp(apps, appId);
  const found = app.versions.find((candidate) => candidate.version === version);
  if (found) return { app, version: found };
  throw new CliError(
    `${appId} has no version ${version}: its versions are ${listed(app.versions.map((v) => v.version))}. ` +
      'A new version is submitted with `svc publish`.',
  );
}
