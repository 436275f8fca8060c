/**
 * My mini-apps: each app with every version, its review state and reason, the brands it runs on,
 * the live version and the last change (what `svc status` shows, and more). Withdraw a version in
 * review, release an approved one; the service's rules decide, and its refusals are shown as it
 * words them. Each version's package can be downloaded, as submitted.
 */
import { compareVersions, type components, type Problem } from '@svc/sdk';
import { useState } from 'preact/hooks';
import { api, ask } from '../api.ts';
import { ActionWords, Alert, Field, Notice, PageHeading, When } from '../parts.tsx';
import { changed, useRefreshing } from '../refresh.ts';
import { navigate, pages } from '../router.ts';
import {
  brandNames,
  DownloadPackage,
  type MiniAppVersion,
  moveVersion,
  percentOf,
  ReviewStateBadge,
  refusedMove,
} from '../versions.tsx';

type MiniApp = components['schemas']['MiniApp'];

export function MyMiniApps() {
  const [apps, setApps] = useState<MiniApp[]>();
  const [problem, setProblem] = useState<Problem>();
  const [news, setNews] = useState<string>();

  async function load() {
    const listed = await ask(api.GET('/api/v1/mini-apps/mine'));
    if (!listed.ok) return setProblem(listed.problem);
    // A refusal said of the list as it was (a move refused) is stale once the list has moved on.
    if (changed(apps, listed.data.mini_apps)) setProblem(undefined);
    setApps(listed.data.mini_apps);
  }
  useRefreshing(load);

  async function move(
    version: MiniAppVersion,
    to: 'withdrawn' | 'published' | 'rolling_out',
    percent?: number,
  ) {
    setNews(undefined);
    const moved = await moveVersion(version, to, undefined, percent === undefined ? undefined : { percent });
    // Refused or not, the list is asked for again: a refusal often means it changed meanwhile.
    await load();
    if (!moved.ok) return setProblem(refusedMove(version, moved.problem));
    setProblem(undefined);
    setNews(
      to === 'published'
        ? `Released ${version.app_id} ${version.version}: it is live on cars.`
        : to === 'rolling_out'
          ? `Rolling out ${version.app_id} ${version.version} to ${percent} % of the cars: follow it on its rollout page.`
          : `Withdrew ${version.app_id} ${version.version} from review.`,
    );
  }

  return (
    <main>
      <PageHeading title="My mini-apps">My mini-apps</PageHeading>
      {news && <Notice>{news}</Notice>}
      {problem && <Alert>{problem.detail}</Alert>}
      {apps?.length === 0 && (
        <p>
          No mini-apps yet. Publish one from its folder with <code>svc publish</code>; it shows here as it
          moves through review.
        </p>
      )}
      {apps?.map((app) => (
        <AppCard key={app.id} app={app} onMove={move} onProblem={setProblem} />
      ))}
    </main>
  );
}

function AppCard({
  app,
  onMove,
  onProblem,
}: {
  app: MiniApp;
  onMove: (version: MiniAppVersion, to: 'withdrawn' | 'published' | 'rolling_out', percent?: number) => void;
  onProblem: (problem: Problem) => void;
}) {
  const headingId = `app-${app.id}`;
  return (
    <section class="card" aria-labelledby={headingId}>
      <h2 id={headingId}>
        {app.name} <code class="app-id">{app.id}</code>
      </h2>
      <dl>
        <dt>Live version</dt>
        <dd>{app.live_version ?? 'none'}</dd>
        <dt>Last change</dt>
        <dd>
          <When at={app.updated_at} />
        </dd>
      </dl>
      {app.versions.some((v) => v.review_state === 'rolling_out' || v.review_state === 'rolled_back') && (
        <p>
          <a
            href={pages.rollout}
            onClick={(event) => {
              event.preventDefault();
              navigate(pages.rollout, { state: { appId: app.id } });
            }}
          >
            Rollout of {app.name}
          </a>
        </p>
      )}
      {/* A narrow screen scrolls the table sideways: the keyboard must reach the scrolling too. */}
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region takes focus so that arrow keys scroll it (WAI-ARIA, axe's scrollable-region-focusable). */}
      <section class="table-scroll" aria-labelledby={`${headingId}-versions`} tabIndex={0}>
        <table>
          <caption id={`${headingId}-versions`}>Versions of {app.name}, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Version</th>
              <th scope="col">Review</th>
              <th scope="col">Brands</th>
              <th scope="col">Last change</th>
            </tr>
          </thead>
          <tbody>
            {app.versions.map((version) => (
              <tr key={version.id}>
                <th scope="row">{version.version}</th>
                <td>
                  <ReviewStateBadge state={version.review_state} />
                  {version.reason && <p class="reason-text">{version.reason}</p>}
                  <VersionActions version={version} app={app} onMove={onMove} />
                  <DownloadPackage version={version} onProblem={onProblem} />
                </td>
                <td>{brandNames(version)}</td>
                <td>
                  <When at={version.updated_at} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
    </section>
  );
}

/** The moves the service would take from this developer now; none for a version it would refuse. */
function VersionActions({
  version,
  app,
  onMove,
}: {
  version: MiniAppVersion;
  app: MiniApp;
  onMove: (version: MiniAppVersion, to: 'withdrawn' | 'published' | 'rolling_out', percent?: number) => void;
}) {
  const appName = app.name;
  if (version.review_state === 'submitted' || version.review_state === 'in_review') {
    return (
      <button type="button" class="secondary" onClick={() => onMove(version, 'withdrawn')}>
        <ActionWords action="Withdraw" on={`${appName} ${version.version}`} />
      </button>
    );
  }
  if (version.review_state === 'approved') {
    // The service refuses to put an older version live over a newer one.
    if (app.live_version && compareVersions(version.version, app.live_version) < 0) {
      return <p class="hint">A newer version is live: this one can no longer be released.</p>;
    }
    return (
      <>
        <button type="button" onClick={() => onMove(version, 'published')}>
          <ActionWords action="Release" on={`${appName} ${version.version}`} />
        </button>
        <RollOut
          version={version}
          appName={appName}
          onRollOut={(percent) => onMove(version, 'rolling_out', percent)}
        />
      </>
    );
  }
  return null;
}

/** Release to a share of the cars first: a percentage, then the version's rollout page. */
function RollOut({
  version,
  appName,
  onRollOut,
}: {
  version: MiniAppVersion;
  appName: string;
  onRollOut: (percent: number) => void;
}) {
  const [percent, setPercent] = useState('10');
  const [error, setError] = useState<string>();
  return (
    <form
      class="roll-out"
      noValidate
      onSubmit={(event) => {
        event.preventDefault();
        const typed = percentOf(percent);
        if ('refusal' in typed) return setError(typed.refusal);
        setError(undefined);
        onRollOut(typed.percent);
      }}
    >
      <Field
        label={`Share of the cars for ${appName} ${version.version}, in %`}
        name="percent"
        value={percent}
        onInput={setPercent}
        error={error}
        required
      />
      <button type="submit" class="secondary">
        <ActionWords action="Roll out" on={`${appName} ${version.version} to ${percent} % of the cars`} />
      </button>
    </form>
  );
}
