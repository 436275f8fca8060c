/**
 * Each car's and connector's broker credential in SQL, so that the key-value store and Mosquitto's
 * dynamic security can be rebuilt from it (cars/broker-credential-sync.ts): the secret's hash, and
 * the secret itself sealed with the key-encryption key (Mosquitto takes only plain passwords).
 * A credential issued before this table has only its hash here (taken from the key-value store).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('broker_credentials', (t) => {
    // A car's prefixed device id, or `connector:<brand>:<name>`.
    t.text('username').primary();
    t.text('role').notNullable().checkIn(['car', 'connector']);
    t.text('brand').notNullable();
    t.text('secret_sha256').notNullable();
    t.text('secret_ciphertext');
    t.text('key_encryption_key_id');
    t.text('encryption_algorithm');
    t.timestamp('updated_at', { useTz: true }).notNullable();
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('broker_credentials');
}
