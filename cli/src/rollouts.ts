/**
 * An app's staged rollout in `svc`: the percentage and brands a command line gives, the moves
 * (`POST …/rollout/moves`), what to do after a refusal, and the rollout drawn as text.
 */
import { type Brand, brands, type components, isBrand } from '@svc/sdk';
import { CliError, ExitCode } from './errors.ts';
import { type Advice, expectOk, type Session } from './session.ts';
import { formatTable } from './table.ts';

export type Rollout = components['schemas']['Rollout'];
type RolloutMove = components['schemas']['RolloutMoveRequest']['move'];

/** A percentage of the eligible cars, 1 to 100 (`10` or `10%`), or exit 2. */
export function parsePercent(raw: string, what: string): number {
  const match = /^\s*(\d{1,3})\s*%?\s*$/.exec(raw);
  const percent = match ? Number(match[1]) : Number.NaN;
  if (percent >= 1 && percent <= 100) return percent;
  throw new CliError(
    `${what} must be a whole percentage from 1 to 100 (the share of the eligible cars), not "${raw}".`,
    ExitCode.usage,
  );
}

/** `--brands a,b`: each a brand of the contract, none twice, or exit 2. */
export function parseBrands(raw: string): Brand[] {
  const names = raw
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  const unknown = names.filter((name) => !isBrand(name));
  if (names.length === 0 || unknown.length > 0) {
    const what = names.length === 0 ? 'names no brand' : `has ${unknown.map((n) => `"${n}"`).join(', ')}`;
    throw new CliError(
      `--brands ${what}: give brands separated by commas, from ${brands.join(', ')} (for example --brands ${brands[0]},${brands[1]}).`,
      ExitCode.usage,
    );
  }
  return [...new Set(names)] as Brand[];
}

/** The next step after a refusal of a rollout move or read, by the problem's code. */
export function rolloutAdvice(appId: string): Advice {
  return (problem) =>
    ({
      no_rollout: `Start one with \`svc release ${appId} <version> --rollout <percent>\`.`,
      rollout_ended: `See how it ended: \`svc rollout status ${appId}\`.`,
      rollout_paused: `Resume it with \`svc rollout resume ${appId}\`.`,
      rollout_not_paused: `See where it stands: \`svc rollout status ${appId}\`.`,
      percent_only_grows: `Complete it (\`svc rollout complete ${appId}\`) or roll it back (\`svc rollout rollback ${appId}\`).`,
    })[problem.code];
}

/** Moves the app's rollout; the rollout after the move. */
export function moveRollout(
  session: Session,
  appId: string,
  move: RolloutMove,
  percent?: number,
): Promise<Rollout> {
  return expectOk(
    session,
    session.client.POST('/api/v1/mini-apps/{app_id}/rollout/moves', {
      params: { path: { app_id: appId } },
      body: percent === undefined ? { move } : { move, percent },
    }),
    rolloutAdvice(appId),
  );
}

export function readRollout(session: Session, appId: string): Promise<Rollout> {
  return expectOk(
    session,
    session.client.GET('/api/v1/mini-apps/{app_id}/rollout', { params: { path: { app_id: appId } } }),
    rolloutAdvice(appId),
  );
}

const stateWords: Record<Rollout['state'], string> = {
  active: 'active',
  paused: 'paused',
  completed: 'completed',
  rolled_back: 'rolled back',
};

export const brandsInWords = (rollout: Pick<Rollout, 'brands'>) =>
  rollout.brands ? rollout.brands.join(', ') : 'every brand the manifest lists';

/** The counts of the progress table, in the order the contract's RolloutProgress tells them. */
const progressColumns = ['eligible', 'waiting', 'queued', 'sent', 'installed', 'failed', 'expired'] as const;

/** The rollout as `svc rollout status` shows it: what it is, then its progress as a table. */
export function formatRollout(rollout: Rollout): string {
  const about = formatTable(
    ['APP', rollout.app_id],
    [
      ['VERSION', rollout.version],
      ['PREVIOUS', rollout.previous_version ?? '- (the first version of the app)'],
      ['PERCENT', `${rollout.percent} %`],
      ['BRANDS', brandsInWords(rollout)],
      ['STATE', stateWords[rollout.state]],
      ['UPDATED', rollout.updated_at],
    ],
  );
  const progress = formatTable(
    progressColumns.map((column) => column.toUpperCase()),
    [progressColumns.map((column) => String(rollout.progress[column]))],
  );
  return `${about}\n${progress}`;
}

/** What can be done next with a rollout in its state, for stderr. */
export function nextMoves(rollout: Rollout): string | undefined {
  const app = rollout.app_id;
  switch (rollout.state) {
    case 'active':
      if (rollout.percent === 100) {
        return `It reaches every car in it: complete it to publish it (\`svc rollout complete ${app}\`), or pause or roll it back.`;
      }
      return `Raise it with \`svc rollout set <percent> ${app}\`, or pause, complete or roll it back (\`svc rollout pause|complete|rollback ${app}\`).`;
    case 'paused':
      return `Paused: no install command is made until \`svc rollout resume ${app}\`; or complete or roll it back.`;
    default:
      return undefined;
  }
}

/** A rollout that has ended and has nothing left on its way to the cars: a watch stops there. */
export function isSettled(rollout: Rollout): boolean {
  const ended = rollout.state === 'completed' || rollout.state === 'rolled_back';
  return ended && rollout.progress.queued === 0 && rollout.progress.sent === 0;
}

/** What a move did, in a sentence. */
export function moveDone(move: RolloutMove, rollout: Rollout): string {
  const name = `${rollout.app_id} ${rollout.version}`;
  const previous = rollout.previous_version;
  switch (move) {
    case 'set_percent':
      return `The rollout of ${name} now reaches ${rollout.percent} % of the eligible cars (${brandsInWords(rollout)}).`;
    case 'pause':
      return `Paused the rollout of ${name} at ${rollout.percent} %: no install command is made for the app until \`svc rollout resume ${rollout.app_id}\`.`;
    case 'resume':
      return `Resumed the rollout of ${name} at ${rollout.percent} %.`;
    case 'complete':
      return `Completed the rollout of ${name}: it is published for every eligible car${previous ? `, and ${previous} is superseded` : ''}.`;
    case 'rollback':
      return `Rolled back the rollout of ${name}: the cars that got it are moved back${previous ? ` to ${previous}` : ''}, and ${rollout.version} can no longer be installed.`;
  }
}

/**
 * One move of `svc rollout set|pause|resume|complete|rollback`, said on stdout: the API's rollout
 * with `--json`, else what the move did, and on stderr how to follow the cars.
 */
export async function reportMove(
  session: Session,
  output: { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream; json: boolean },
  appId: string,
  move: RolloutMove,
  percent?: number,
): Promise<number> {
  const rollout = await moveRollout(session, appId, move, percent);
  if (output.json) {
    output.stdout.write(`${JSON.stringify(rollout)}\n`);
    return 0;
  }
  output.stdout.write(`${moveDone(move, rollout)}\n`);
  output.stderr.write(`  Follow the cars with \`svc rollout status ${appId} --watch\`.\n`);
  return 0;
}
