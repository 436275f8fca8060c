/**
 * `npm run rotate-key-encryption-key`: re-encrypts every secret the store keeps with
 * SVC_KEY_ENCRYPTION_KEY, opening what is sealed with SVC_PREVIOUS_KEY_ENCRYPTION_KEY (or, in
 * embedded mode, DATA_DIR/key-encryption-key). Run it once every replica knows both keys
 * (docs/operating.md, "Keys at rest"); running it again finds nothing to do.
 */
import { ConfigError, loadConfig } from './config.ts';
import { lockSigningKeys } from './identity/signing-key-repository.ts';
import { sealSigningKeys } from './identity/signing-keys.ts';
import { DataDirInUse, lockDataDir } from './store/data-dir-lock.ts';
import { embeddedDbDir, migrationConfig, openStore, storeOpened } from './store/db.ts';
import { KeyEncryptionError, loadKeyRing } from './store/key-encryption.ts';

function refuse(message: string): never {
  process.stderr.write(`svc: ${message}\n`);
  process.exit(2);
}

async function rotate(): Promise<void> {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) refuse(error.message);
    throw error;
  }
  if (!config.keyEncryptionKey) {
    refuse(
      'SVC_KEY_ENCRYPTION_KEY must name the new key-encryption key (openssl rand -base64 32), and SVC_PREVIOUS_KEY_ENCRYPTION_KEY the one it replaces',
    );
  }
  // The embedded store is one process's: not while the service runs on it.
  let lock: ReturnType<typeof lockDataDir> | undefined;
  if (!config.databaseUrl) {
    try {
      lock = lockDataDir(config.dataDir);
    } catch (error) {
      if (error instanceof DataDirInUse) refuse(error.message);
      throw error;
    }
  }
  const keyRing = loadKeyRing(config);
  const db = openStore({
    databaseUrl: config.databaseUrl,
    pgliteDir: config.databaseUrl ? undefined : embeddedDbDir(config.dataDir),
  });
  try {
    await storeOpened(db);
    const [, pending] = await db.migrate.list(migrationConfig);
    if (pending.length > 0) {
      refuse('the database has migrations of this build still to run: start the service once first');
    }
    const signingKeys = await db.transaction(async (trx) => {
      await lockSigningKeys(trx);
      return sealSigningKeys(trx, keyRing, { reseal: true });
    });
    process.stdout.write(
      `svc: re-encrypted with key-encryption key ${keyRing.keyId}: ${signingKeys} signing keys. Nothing in the store needs the previous key now: drop SVC_PREVIOUS_KEY_ENCRYPTION_KEY at the next restart, and keep the old key only as long as backups taken before this.\n`,
    );
  } catch (error) {
    if (error instanceof KeyEncryptionError) refuse(error.message);
    throw error;
  } finally {
    await db.destroy();
    lock?.release();
  }
}

await rotate();
