/**
 * The migrations, in order. Listed rather than read from a folder so that they load the same
 * way under tsx, in a bundle and in tests.
 */
import type { Knex } from 'knex';
import * as accounts from './20261121090000_accounts.ts';
import * as signingKeys from './20261121090100_signing_keys.ts';
import * as miniApps from './20261121100000_mini_apps.ts';
import * as adminClaims from './20261123090000_admin_claims.ts';
import * as uploadLeases from './20261201090000_upload_leases.ts';
import * as uploadClaims from './20261201100000_upload_claims.ts';
import * as cars from './20261210090000_cars.ts';
import * as carReports from './20261215090000_car_reports.ts';
import * as presenceOrder from './20261216090000_presence_order.ts';
import * as carCommands from './20261220090000_car_commands.ts';
import * as pairingCodes from './20261220090100_pairing_codes.ts';
import * as idempotencyKeys from './20261220100000_idempotency_keys.ts';
import * as signingKeyStates from './20261225090000_signing_key_states.ts';
import * as migrationReleases from './20261226090000_migration_releases.ts';
import * as sealedSigningKeys from './20261227090000_sealed_signing_keys.ts';
import * as brokerCredentials from './20261227100000_broker_credentials.ts';
import * as commandClaims from './20261228090000_command_claims.ts';
import * as appRollouts from './20261229090000_app_rollouts.ts';
import * as carOwnerIndex from './20261230090000_car_owner_index.ts';
import * as webhooks from './20261231090000_webhooks.ts';

export interface Migration {
  up(db: Knex): Promise<void>;
  down(db: Knex): Promise<void>;
  /**
   * The oldest release of the service that still runs on the database this migration leaves:
   * a release older than this build's when the migration only adds (expand), so that the
   * previous release can run beside it or be rolled back to. Unset: this build's own release.
   */
  oldestRelease?: string;
}

export type MigrationList = [name: string, migration: Migration][];

export const migrations: MigrationList = [
  ['20261121090000_accounts', accounts],
  ['20261121090100_signing_keys', signingKeys],
  ['20261121100000_mini_apps', miniApps],
  ['20261123090000_admin_claims', adminClaims],
  ['20261201090000_upload_leases', uploadLeases],
  ['20261201100000_upload_claims', uploadClaims],
  ['20261210090000_cars', cars],
  ['20261215090000_car_reports', carReports],
  ['20261216090000_presence_order', presenceOrder],
  ['20261220090000_car_commands', carCommands],
  ['20261220090100_pairing_codes', pairingCodes],
  ['20261220100000_idempotency_keys', idempotencyKeys],
  ['20261225090000_signing_key_states', signingKeyStates],
  ['20261226090000_migration_releases', migrationReleases],
  ['20261227090000_sealed_signing_keys', sealedSigningKeys],
  ['20261227100000_broker_credentials', brokerCredentials],
  ['20261228090000_command_claims', commandClaims],
  ['20261229090000_app_rollouts', appRollouts],
  ['20261230090000_car_owner_index', carOwnerIndex],
  ['20261231090000_webhooks', webhooks],
];

export const migrationSource: Knex.MigrationSource<[string, Migration]> = {
  getMigrations: async () => migrations,
  getMigrationName: ([name]) => name,
  getMigration: async ([, migration]) => migration,
};
