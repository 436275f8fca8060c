/**
 * `npm run rotate-key-encryption-key`: re-encrypts every secret the store keeps with
 * SVC_KEY_ENCRYPTION_KEY, opening what is sealed with SVC_PREVIOUS_KEY_ENCRYPTION_KEY (or, in
 * embedded mode, DATA_DIR/key-encryption-key). Run it once every replica knows both keys
 * (docs/operating.md, "Keys at rest"); running it again finds nothing to do.
 */

import {
  listSecretsNotSealedWith,
  resealSecret,
  secretContext,
} from './broker/broker-credential-repository.ts';
import { lockSigningKeys } from './identity/signing-key-repository.ts';
import { sealSigningKeys } from './identity/signing-keys.ts';
import { loadConfigOrRefuse, openCommandStore, refuse } from './operator-command.ts';
import { KeyEncryptionError, loadKeyRing } from './store/key-encryption.ts';
import { resealWebhookSecrets } from './webhooks/webhook-secrets.ts';

async function rotate(): Promise<void> {
  const config = loadConfigOrRefuse();
  if (!config.keyEncryptionKey) {
    refuse(
      'SVC_KEY_ENCRYPTION_KEY must name the new key-encryption key (openssl rand -base64 32), and SVC_PREVIOUS_KEY_ENCRYPTION_KEY the one it replaces',
    );
  }
  const store = await openCommandStore(config);
  try {
    const keyRing = loadKeyRing(config);
    const signingKeys = await store.db.transaction(async (trx) => {
      await lockSigningKeys(trx);
      return sealSigningKeys(trx, keyRing, { reseal: true });
    });
    let brokerSecrets = 0;
    for (const row of await listSecretsNotSealedWith(store.db, keyRing.keyId)) {
      if (!row.secret) continue;
      const context = secretContext(row.username);
      await resealSecret(store.db, row.username, keyRing.seal(keyRing.open(row.secret, context), context));
      brokerSecrets += 1;
    }
    const webhookSecrets = await resealWebhookSecrets(store.db, keyRing);
    process.stdout.write(
      `svc: re-encrypted with key-encryption key ${keyRing.keyId}: ${signingKeys} signing keys, ${brokerSecrets} broker secrets, ${webhookSecrets} webhook secrets. Nothing in the store needs the previous key now: drop SVC_PREVIOUS_KEY_ENCRYPTION_KEY at the next restart, and keep the old key only as long as backups taken before this.\n`,
    );
  } catch (error) {
    if (error instanceof KeyEncryptionError) refuse(error.message);
    throw error;
  } finally {
    await store.close();
  }
}

await rotate();
