/** Password hashes: the cost travels with the hash, so a hash made at one cost verifies at another. */
import assert from 'node:assert/strict';
import { test } from 'vitest';
import { createPasswords, passwordCost } from '../src/accounts/passwords.ts';

test('when the service hashes a password then the hash names the full scrypt cost and verifies', async () => {
  const passwords = createPasswords();
  const stored = await passwords.hash('correct horse battery');
  assert.match(stored, new RegExp(`^scrypt\\$${passwordCost.N}\\$${passwordCost.r}\\$${passwordCost.p}\\$`));
  assert.equal(await passwords.verify('correct horse battery', stored), true);
  assert.equal(await passwords.verify('correct horse battery!', stored), false);
});

test('when a hash was made at another cost then it still verifies, at the cost it names', async () => {
  const cheap = await createPasswords({ N: 2 ** 10, r: 8, p: 1 }).hash('correct horse battery');
  assert.match(cheap, /^scrypt\$1024\$8\$1\$/);
  const service = createPasswords();
  assert.equal(await service.verify('correct horse battery', cheap), true);
  assert.equal(await service.verify('wrong', cheap), false);
  assert.equal(await service.decoyCheck('correct horse battery'), false);
});

test('when the stored value is not a scrypt hash then nothing verifies against it', async () => {
  const passwords = createPasswords();
  for (const stored of ['', 'bcrypt$2$x$y', 'scrypt$1024$8$1$$']) {
    assert.equal(await passwords.verify('anything', stored), false, stored);
  }
});
