/** Mini-app versions as both pages show them: review states in words, and moving a version on. */
import type { components, Problem } from '@svc/sdk';
import { useState } from 'preact/hooks';
import { api, ask, fieldErrors, type Outcome } from './api.ts';
import { ActionWords, Field, useFocusOnRefusal, useSubmit } from './parts.tsx';

export type MiniAppVersion = components['schemas']['MiniAppVersion'];
export type ReviewState = components['schemas']['ReviewState'];

export const stateNames: Record<ReviewState, string> = {
  submitted: 'Submitted, waiting for review',
  in_review: 'In review',
  approved: 'Approved',
  rejected: 'Rejected',
  published: 'Live on cars',
  rolling_out: 'Rolling out to some cars',
  rolled_back: 'Rolled back',
  withdrawn: 'Withdrawn',
  superseded: 'Superseded by a newer version',
  removed: 'Removed by an admin',
};

export function ReviewStateBadge({ state }: { state: ReviewState }) {
  return <span class={`state state-${state}`}>{stateNames[state]}</span>;
}

export function moveVersion(
  version: MiniAppVersion,
  to: ReviewState,
  reason?: string,
  rollout?: components['schemas']['RolloutRequest'],
): Promise<Outcome<MiniAppVersion>> {
  return ask(
    api.POST('/api/v1/mini-apps/versions/{version_id}/transitions', {
      params: { path: { version_id: version.id } },
      body: { to, ...(reason === undefined ? {} : { reason }), ...(rollout ? { rollout } : {}) },
    }),
  );
}

/**
 * A refused move in the user's words. `move_not_allowed` nearly always means the version moved on
 * while the page showed it (its developer withdrew it, another admin took it): the service's
 * words name states, not what happened.
 */
export function refusedMove(version: MiniAppVersion, problem: Problem): Problem {
  if (problem.code !== 'move_not_allowed') return problem;
  return {
    ...problem,
    detail: `${version.app_id} ${version.version} moved on meanwhile (its developer or an admin moved it): the page now shows where it is.`,
  };
}

/**
 * Saves the version's package: for an admin to read before judging it, for its developer to check
 * what was submitted. Fetched with the session's token (a plain link could not carry it), then
 * handed to the browser as a file named as the service names it.
 */
export function DownloadPackage({
  version,
  onProblem,
}: {
  version: MiniAppVersion;
  onProblem: (problem: Problem) => void;
}) {
  const [busy, setBusy] = useState(false);
  async function save() {
    if (busy) return;
    setBusy(true);
    try {
      const fetched = await ask(
        api.GET('/api/v1/mini-apps/versions/{version_id}/package', {
          params: { path: { version_id: version.id } },
          parseAs: 'blob',
        }),
      );
      if (!fetched.ok) {
        const { problem } = fetched;
        const detail = `The package of ${version.app_id} ${version.version} could not be downloaded: ${problem.detail}`;
        return onProblem({ ...problem, detail });
      }
      const link = document.createElement('a');
      link.href = URL.createObjectURL(fetched.data);
      link.download = `${version.app_id}-${version.version}.tgz`;
      link.click();
      // The browser reads the file after the click returns: let it go a while later.
      setTimeout(() => URL.revokeObjectURL(link.href), 60_000);
    } finally {
      setBusy(false);
    }
  }
  return (
    <button type="button" class="secondary" aria-disabled={busy} onClick={save}>
      <ActionWords action="Download package" on={`${version.app_id} ${version.version}`} />
    </button>
  );
}

/** The brands a version runs on, as its manifest lists them: all brands when it lists none. */
export function brandNames(version: MiniAppVersion): string {
  return version.manifest.brands?.join(', ') ?? 'All brands';
}

/** The bytes of a package in the unit a person reads. */
export function packageSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/**
 * A move that needs a reason the developer will read (reject, remove): the reason's field and the
 * button that makes the move, with the service's refusal shown at the field.
 */
export function MoveWithReason({
  version,
  to,
  action,
  onMoved,
}: {
  version: MiniAppVersion;
  to: 'rejected' | 'removed';
  action: string;
  onMoved: (moved: MiniAppVersion) => void;
}) {
  const [reason, setReason] = useState('');
  const [error, setError] = useState<string>();
  /** The service's refusal, at the reason's field; a missing reason said as what to do. */
  const reasonRefusal = (problem: Problem) =>
    problem.code === 'reason_required'
      ? `Give a reason for ${to === 'rejected' ? 'rejecting' : 'removing'} ${version.app_id} ${version.version}: the developer reads it.`
      : (fieldErrors(problem).reason ?? refusedMove(version, problem).detail);
  const form = useFocusOnRefusal(error);
  const { busy, onSubmit } = useSubmit(async () => {
    const moved = await moveVersion(version, to, reason.trim() === '' ? undefined : reason);
    if (!moved.ok) return setError(reasonRefusal(moved.problem));
    onMoved(moved.data);
  });
  return (
    <form ref={form} class="reason" onSubmit={onSubmit} noValidate>
      <Field
        label={`Reason to ${action.toLowerCase()} ${version.app_id} ${version.version}`}
        name="reason"
        multiline
        hint="The developer reads it."
        value={reason}
        onInput={setReason}
        error={error}
        required
      />
      <button type="submit" class="danger" aria-disabled={busy}>
        <ActionWords action={action} on={`${version.app_id} ${version.version}`} />
      </button>
    </form>
  );
}

/** A share of the cars as typed: the whole percentage from 1 to 100, or what to type instead. */
export function percentOf(typed: string): { percent: number } | { refusal: string } {
  const percent = Number(typed.trim());
  if (!/^\d+$/.test(typed.trim()) || percent < 1 || percent > 100) {
    return { refusal: 'Give a whole number from 1 to 100.' };
  }
  return { percent };
}
