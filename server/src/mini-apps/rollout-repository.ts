/** SQL for the apps' staged rollouts (`app_rollouts`). */
import type { components } from '../../../generated/openapi.ts';
import type { Db } from '../store/db.ts';

export type RolloutState = components['schemas']['RolloutState'];
type Brand = components['schemas']['Brand'];

export interface RolloutRow {
  id: string;
  app_id: string;
  version_id: string;
  previous_version_id: string | null;
  percent: number;
  /** Null: every brand the version's manifest lists. */
  brands: Brand[] | null;
  state: RolloutState;
  created_at: Date;
  updated_at: Date;
}

/** The states of a rollout under way: at most one an app (a unique index says so too). */
export const underWayStates: readonly RolloutState[] = ['active', 'paused'];

// PGlite may return jsonb as text.
function rolloutFromDb(row: RolloutRow): RolloutRow {
  const brands = typeof row.brands === 'string' ? (JSON.parse(row.brands) as Brand[] | null) : row.brands;
  return { ...row, brands };
}

export async function insertRollout(db: Db, row: RolloutRow): Promise<RolloutRow> {
  const [inserted] = await db<RolloutRow>('app_rollouts')
    .insert({ ...row, brands: row.brands === null ? null : (JSON.stringify(row.brands) as never) })
    .returning('*');
  return rolloutFromDb(inserted as RolloutRow);
}

/** The app's rollout under way, locked until the transaction ends when `lock`. */
export async function findRolloutUnderWay(
  db: Db,
  appId: string,
  options: { lock?: boolean } = {},
): Promise<RolloutRow | undefined> {
  const query = db<RolloutRow>('app_rollouts').where({ app_id: appId }).whereIn('state', underWayStates);
  const row = await (options.lock ? query.forUpdate() : query).first();
  return row && rolloutFromDb(row);
}

/** The app's latest rollout, under way or ended. */
export async function findLatestRollout(db: Db, appId: string): Promise<RolloutRow | undefined> {
  const row = await db<RolloutRow>('app_rollouts')
    .where({ app_id: appId })
    .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id' }])
    .first();
  return row && rolloutFromDb(row);
}

export async function updateRollout(
  db: Db,
  id: string,
  changes: { state?: RolloutState; percent?: number; updated_at: Date },
): Promise<RolloutRow> {
  const [row] = await db<RolloutRow>('app_rollouts').where({ id }).update(changes).returning('*');
  return rolloutFromDb(row as RolloutRow);
}
