/**
 * The one pairing code of a car (DESIGN §9): its salted hash, when it expires and the tries it has
 * left. Kept after it expires or is spent, so that a late try says which; replaced by the next
 * code asked for, deleted when it pairs the car.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('pairing_codes', (t) => {
    t.text('device_id').primary().references('device_id').inTable('cars').onDelete('CASCADE');
    // HMAC-SHA256 of the code under a salt of its own; neither is ever shown.
    t.text('code_hash').notNullable();
    t.text('salt').notNullable();
    t.integer('tries_left').notNullable();
    // The pairing.show_code command that carries the code to the car.
    t.uuid('command_id').notNullable().references('command_id').inTable('car_commands').onDelete('CASCADE');
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('pairing_codes');
}
