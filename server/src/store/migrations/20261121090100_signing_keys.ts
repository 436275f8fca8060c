/** The ES256 keys that sign identity tokens; the public halves are served as the JWKS. */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('signing_keys', (t) => {
    t.text('kid').primary();
    t.jsonb('public_jwk').notNullable();
    t.jsonb('private_jwk').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('signing_keys');
}
