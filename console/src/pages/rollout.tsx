/**
 * An app's rollout, for its developer: the version rolling out and to how many of the cars, the
 * cars counted by where the version stands on them (no device id: ADR 0049), and the moves the
 * rollout's state allows (raise, pause, resume, complete, roll back), each as `svc rollout` makes
 * it. A rollback asks first. Refusals are shown as the service words them.
 */
import type { components, Problem } from '@svc/sdk';
import { useState } from 'preact/hooks';
import { api, ask, fieldErrors } from '../api.ts';
import { Confirm } from '../confirm.tsx';
import {
  ActionWords,
  Alert,
  Field,
  Link,
  Notice,
  PageHeading,
  useFocusOnRefusal,
  useSubmit,
  When,
} from '../parts.tsx';
import { useRefreshing } from '../refresh.ts';
import { pages } from '../router.ts';
import { percentOf } from '../versions.tsx';

type Rollout = components['schemas']['Rollout'];
type RolloutMove = components['schemas']['RolloutMoveRequest'];

const stateWords: Record<Rollout['state'], string> = {
  active: 'Rolling out',
  paused: 'Paused: nothing is sent',
  completed: 'Completed: every car gets it',
  rolled_back: 'Rolled back',
};

const progressColumns: [keyof Rollout['progress'], string][] = [
  ['eligible', 'In the rollout'],
  ['installed', 'Installed'],
  ['sent', 'Sent'],
  ['queued', 'Queued'],
  ['waiting', 'Waiting (offline)'],
  ['expired', 'Expired'],
  ['failed', 'Failed'],
];

export function RolloutPage({ appId }: { appId: string | undefined }) {
  if (!appId) {
    return (
      <main>
        <PageHeading title="Rollout">Rollout</PageHeading>
        <p>
          Which app's rollout to show is not known here (a page opened in a new tab does not say it).{' '}
          <Link to={pages.apps}>Open it from My mini-apps</Link>.
        </p>
      </main>
    );
  }
  return <RolloutDetails key={appId} appId={appId} />;
}

function RolloutDetails({ appId }: { appId: string }) {
  const [rollout, setRollout] = useState<Rollout | null>();
  const [problem, setProblem] = useState<Problem>();
  const [news, setNews] = useState<string>();
  const [askingRollback, setAskingRollback] = useState(false);

  async function load() {
    const read = await ask(
      api.GET('/api/v1/mini-apps/{app_id}/rollout', { params: { path: { app_id: appId } } }),
    );
    if (read.ok) return setRollout(read.data);
    if (read.problem.code === 'no_rollout') return setRollout(null);
    setProblem(read.problem);
  }
  useRefreshing(load);

  async function move(body: RolloutMove, said: (moved: Rollout) => string): Promise<Problem | undefined> {
    setNews(undefined);
    const moved = await ask(
      api.POST('/api/v1/mini-apps/{app_id}/rollout/moves', { params: { path: { app_id: appId } }, body }),
    );
    await load();
    if (!moved.ok) return moved.problem;
    setProblem(undefined);
    setNews(said(moved.data));
    return undefined;
  }
  const moveOrSay = async (body: RolloutMove, said: (moved: Rollout) => string) => {
    const refused = await move(body, said);
    if (refused) setProblem(refused);
  };

  const title = `Rollout of ${appId}`;
  return (
    <main>
      <PageHeading title={title}>{title}</PageHeading>
      {news && <Notice>{news}</Notice>}
      {problem && <Alert>{problem.detail}</Alert>}
      {rollout === null && (
        <p>
          {appId} has had no rollout. Roll an approved version out to a share of the cars from{' '}
          <Link to={pages.apps}>My mini-apps</Link>, or with{' '}
          <code>svc release {appId} &lt;version&gt; --rollout 10</code>.
        </p>
      )}
      {rollout && (
        <>
          <dl>
            <dt>Version</dt>
            <dd>
              {rollout.version}
              {rollout.previous_version && ` (the other cars keep ${rollout.previous_version})`}
            </dd>
            <dt>State</dt>
            <dd>{stateWords[rollout.state]}</dd>
            <dt>Share of the cars</dt>
            <dd>{rollout.percent} %</dd>
            <dt>Brands</dt>
            <dd>{rollout.brands?.join(', ') ?? "All the manifest's brands"}</dd>
            <dt>Started</dt>
            <dd>
              <When at={rollout.created_at} />
            </dd>
            <dt>Last move</dt>
            <dd>
              <When at={rollout.updated_at} />
            </dd>
          </dl>
          <Progress rollout={rollout} />
          {(rollout.state === 'active' || rollout.state === 'paused') && (
            <section aria-labelledby="rollout-moves">
              <h2 id="rollout-moves">Moves</h2>
              {rollout.state === 'active' && (
                <RaisePercent
                  rollout={rollout}
                  onRaise={(percent) =>
                    move(
                      { move: 'set_percent', percent },
                      (moved) => `${appId} ${moved.version} now goes to ${moved.percent} % of the cars.`,
                    )
                  }
                />
              )}
              <div class="actions">
                {rollout.state === 'active' ? (
                  <button
                    type="button"
                    class="secondary"
                    onClick={() =>
                      moveOrSay({ move: 'pause' }, () => 'Paused: no install is sent until you resume.')
                    }
                  >
                    <ActionWords action="Pause" on={`the rollout of ${appId}`} />
                  </button>
                ) : (
                  <button type="button" onClick={() => moveOrSay({ move: 'resume' }, () => 'Resumed.')}>
                    <ActionWords action="Resume" on={`the rollout of ${appId}`} />
                  </button>
                )}
                <button
                  type="button"
                  onClick={() =>
                    moveOrSay(
                      { move: 'complete' },
                      (moved) => `${appId} ${moved.version} is live: every car gets it.`,
                    )
                  }
                >
                  <ActionWords action="Complete" on={`the rollout of ${appId}`} />
                </button>
                <button type="button" class="danger" onClick={() => setAskingRollback(true)}>
                  <ActionWords action="Roll back" on={`the rollout of ${appId}`} />
                </button>
              </div>
            </section>
          )}
          {askingRollback && (
            <Confirm
              title={`Roll back ${appId} ${rollout.version}?`}
              action="Roll back"
              keep="Keep rolling out"
              onCancel={() => setAskingRollback(false)}
              onConfirm={() => {
                setAskingRollback(false);
                void moveOrSay(
                  { move: 'rollback' },
                  (moved) =>
                    `Rolled back: the cars that got ${moved.version} are moved back to ${moved.previous_version ?? 'no version'}.`,
                );
              }}
            >
              <p>
                The {rollout.progress.installed} car(s) that installed {rollout.version} are moved back to{' '}
                {rollout.previous_version ?? 'no version'}, and {rollout.version} can never be installed
                again.
              </p>
            </Confirm>
          )}
        </>
      )}
    </main>
  );
}

function Progress({ rollout }: { rollout: Rollout }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region takes focus so that arrow keys scroll it (WAI-ARIA, axe's scrollable-region-focusable).
    <section class="table-scroll" aria-labelledby="rollout-progress" tabIndex={0}>
      <table>
        <caption id="rollout-progress">Cars by where {rollout.version} stands on them</caption>
        <thead>
          <tr>
            {progressColumns.map(([key, words]) => (
              <th key={key} scope="col">
                {words}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          <tr>
            {progressColumns.map(([key]) => (
              <td key={key}>{rollout.progress[key]}</td>
            ))}
          </tr>
        </tbody>
      </table>
    </section>
  );
}

function RaisePercent({
  rollout,
  onRaise,
}: {
  rollout: Rollout;
  onRaise: (percent: number) => Promise<Problem | undefined>;
}) {
  const [percent, setPercent] = useState('');
  const [error, setError] = useState<string>();
  const form = useFocusOnRefusal(error);
  const { busy, onSubmit } = useSubmit(async () => {
    const typed = percentOf(percent);
    if ('refusal' in typed) return setError(typed.refusal);
    const refused = await onRaise(typed.percent);
    if (refused) return setError(fieldErrors(refused).percent ?? refused.detail);
    setError(undefined);
    setPercent('');
  });
  return (
    <form ref={form} onSubmit={onSubmit} noValidate>
      <Field
        label="New share of the cars, in %"
        name="percent"
        hint={`Now ${rollout.percent} %; a share only grows (the cars that got it keep it).`}
        value={percent}
        onInput={setPercent}
        error={error}
        required
      />
      <button type="submit" aria-disabled={busy}>
        <ActionWords action="Raise" on={`the rollout of ${rollout.app_id}`} />
      </button>
    </form>
  );
}
