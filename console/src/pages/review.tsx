/**
 * The admins' review queue, oldest first: take a version in review, approve it, or reject it with
 * a reason; below it the versions live on cars, which an admin may remove with a reason.
 */
import type { components, Problem } from '@svc/sdk';
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { api, ask } from '../api.ts';
import { ActionWords, Alert, Notice, PageHeading, When } from '../parts.tsx';
import { changed, useRefreshing } from '../refresh.ts';
import {
  brandNames,
  DownloadPackage,
  type MiniAppVersion,
  MoveWithReason,
  moveVersion,
  packageSize,
  ReviewStateBadge,
  refusedMove,
} from '../versions.tsx';

type ReviewQueue = components['schemas']['ReviewQueue'];

export function ReviewQueuePage() {
  const [queue, setQueue] = useState<ReviewQueue>();
  const [problem, setProblem] = useState<Problem>();
  const [news, setNews] = useState<string>();

  async function load() {
    const listed = await ask(api.GET('/api/v1/admin/review-queue'));
    if (!listed.ok) return setProblem(listed.problem);
    if (changed(queue, listed.data)) setProblem(undefined);
    setQueue(listed.data);
  }
  // Versions arrive, and developers withdraw them, while an admin has the queue open.
  useRefreshing(load);

  async function moved(version: MiniAppVersion) {
    await load();
    setProblem(undefined);
    setNews(`${version.app_id} ${version.version} is now: ${version.review_state.replace('_', ' ')}.`);
  }
  async function move(version: MiniAppVersion, to: 'in_review' | 'approved') {
    setNews(undefined);
    const outcome = await moveVersion(version, to);
    if (outcome.ok) return moved(outcome.data);
    // Most often the version moved meanwhile (withdrawn by its developer): show it as it is now.
    await load();
    setProblem(refusedMove(version, outcome.problem));
  }

  return (
    <main>
      <PageHeading title="Review queue">Review queue</PageHeading>
      {news && <Notice>{news}</Notice>}
      {problem && <Alert>{problem.detail}</Alert>}
      {queue && (
        <>
          <h2>Waiting for review</h2>
          <VersionCards
            label="Versions waiting for review, oldest first"
            versions={queue.versions}
            empty="Nothing waits for review."
            onProblem={setProblem}
          >
            {(version) =>
              version.review_state === 'submitted' ? (
                <button type="button" onClick={() => move(version, 'in_review')}>
                  <ActionWords action="Start review" on={`of ${version.app_id} ${version.version}`} />
                </button>
              ) : (
                <>
                  <button type="button" onClick={() => move(version, 'approved')}>
                    <ActionWords action="Approve" on={`${version.app_id} ${version.version}`} />
                  </button>
                  <MoveWithReason version={version} to="rejected" action="Reject" onMoved={moved} />
                </>
              )
            }
          </VersionCards>
          <h2>Live on cars</h2>
          <VersionCards
            label="Versions live on cars"
            versions={queue.published}
            empty="No version is live."
            onProblem={setProblem}
          >
            {(version) => <MoveWithReason version={version} to="removed" action="Remove" onMoved={moved} />}
          </VersionCards>
        </>
      )}
    </main>
  );
}

/** One card a version, in the order given, with its package and the moves `children` offers. */
function VersionCards({
  label,
  versions,
  empty,
  onProblem,
  children,
}: {
  label: string;
  versions: MiniAppVersion[];
  empty: string;
  onProblem: (problem: Problem) => void;
  children: (version: MiniAppVersion) => ComponentChildren;
}) {
  if (versions.length === 0) return <p>{empty}</p>;
  return (
    <ol class="cards" aria-label={label}>
      {versions.map((version) => (
        <li key={version.id} class="card">
          <VersionDetails version={version} />
          <DownloadPackage version={version} onProblem={onProblem} />
          {children(version)}
        </li>
      ))}
    </ol>
  );
}

/**
 * What a reviewer needs to judge a version: which app, which origins it will call, which cars'
 * brands it runs on, which bytes.
 */
function VersionDetails({ version }: { version: MiniAppVersion }) {
  return (
    <>
      <h3>
        {version.manifest.name} {version.version} <code class="app-id">{version.app_id}</code>
      </h3>
      <dl>
        <dt>Review state</dt>
        <dd>
          <ReviewStateBadge state={version.review_state} />
        </dd>
        <dt>Submitted</dt>
        <dd>
          <When at={version.submitted_at} />
        </dd>
        <dt>Network</dt>
        <dd>{version.manifest.network?.length ? version.manifest.network.join(', ') : 'none'}</dd>
        <dt>Brands</dt>
        <dd>{brandNames(version)}</dd>
        <dt>Package</dt>
        <dd>
          {packageSize(version.package.size)}, sha256 <code class="digest">{version.package.sha256}</code>
        </dd>
      </dl>
    </>
  );
}
