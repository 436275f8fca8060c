/**
 * The one spelling of a UUID the service takes, in every path, body and MQTT payload: 8-4-4-4-12
 * hexadecimal digits, in either case. Not the `urn:uuid:` form, braces or missing hyphens that
 * JSON Schema's `uuid` format (ajv-formats) also lets through: Postgres refuses those, and an id
 * that passed the contract would have been a 500. The service stores and answers ids in lower case.
 */
export const uuidPatternSource =
  '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
export const uuidPattern = new RegExp(uuidPatternSource);

/** Whether `value` is a UUID as the service spells it (see `uuidPattern`). */
export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && uuidPattern.test(value);
}
