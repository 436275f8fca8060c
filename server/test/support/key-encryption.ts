/**
 * One key-encryption key for every service a test starts, as replicas of one service share theirs:
 * two test services on one store (each with a data folder of its own) open each other's keys.
 */
export const testKeyEncryptionKey = Buffer.alloc(32, 7).toString('base64');
