/**
 * Signing keys' private halves encrypted at rest (store/key-encryption.ts): the ciphertext, the
 * id of the key-encryption key that sealed it and the algorithm, beside the plain `private_jwk`,
 * which the service empties as it seals each key (on the first start that has the key).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.schema.alterTable('signing_keys', (t) => {
    t.text('private_jwk_ciphertext');
    t.text('key_encryption_key_id');
    t.text('encryption_algorithm');
    t.setNullable('private_jwk');
  });
  await db.raw(
    'alter table signing_keys add constraint signing_keys_private_half check (private_jwk is not null or (private_jwk_ciphertext is not null and key_encryption_key_id is not null and encryption_algorithm is not null))',
  );
}

export async function down(db: Knex): Promise<void> {
  await db.raw('alter table signing_keys drop constraint signing_keys_private_half');
  // A migration has no key-encryption key, so sealed keys cannot be turned back into plain ones:
  // they go, and the service makes new ones on its next start (tokens they signed stop verifying).
  await db('signing_keys').whereNull('private_jwk').delete();
  await db.schema.alterTable('signing_keys', (t) => {
    t.dropColumn('private_jwk_ciphertext');
    t.dropColumn('key_encryption_key_id');
    t.dropColumn('encryption_algorithm');
    t.dropNullable('private_jwk');
  });
}
