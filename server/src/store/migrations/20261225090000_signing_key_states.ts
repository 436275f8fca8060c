/**
 * Where each identity-token signing key stands in rotation: `next` (published, not signing yet),
 * `current` (signing), `retired` (no longer signing, published until the tokens it signed have
 * expired). At most one key is next and one current, which the store itself holds to.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.schema.alterTable('signing_keys', (t) => {
    t.text('state').checkIn(['next', 'current', 'retired']);
    // When it became current (began to sign), and when it stopped.
    t.timestamp('activated_at', { useTz: true });
    t.timestamp('retired_at', { useTz: true });
  });
  // No token was ever signed before states (the operation answered 501): the oldest key goes on
  // as the current one; any other (two replicas that started at once made two) is retired now.
  const oldest = await db('signing_keys')
    .orderBy([{ column: 'created_at' }, { column: 'kid' }])
    .first('kid');
  if (oldest) {
    await db('signing_keys')
      .where({ kid: oldest.kid })
      .update({ state: 'current', activated_at: db.fn.now() });
    await db('signing_keys')
      .whereNot({ kid: oldest.kid })
      .update({ state: 'retired', activated_at: db.ref('created_at'), retired_at: db.fn.now() });
  }
  await db.schema.alterTable('signing_keys', (t) => {
    t.dropNullable('state');
  });
  await db.raw(
    "create unique index signing_keys_one_next_one_current on signing_keys (state) where state in ('next', 'current')",
  );
  // The JWKS and the sweep look for keys retired before a time.
  await db.raw("create index signing_keys_retired_at on signing_keys (retired_at) where state = 'retired'");
}

export async function down(db: Knex): Promise<void> {
  await db.raw('drop index signing_keys_retired_at');
  await db.raw('drop index signing_keys_one_next_one_current');
  // Without states every stored key would sign again: keep only the one that signs now.
  await db('signing_keys').whereNot({ state: 'current' }).delete();
  await db.schema.alterTable('signing_keys', (t) => {
    t.dropColumn('state');
    t.dropColumn('activated_at');
    t.dropColumn('retired_at');
  });
}
