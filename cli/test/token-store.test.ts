import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, test } from 'vitest';
import {
  keyringAccount,
  keyringService,
  openTokenStore,
  resolveToken,
  type StoredCredential,
  tokenFilePath,
} from '../src/token-store.ts';

const execFileAsync = promisify(execFile);
const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const tokenStoreModule = fileURLToPath(new URL('../src/token-store.ts', import.meta.url));

const credential: StoredCredential = {
  access_token: 'svc_stored_token',
  expires_at: '2030-01-01T00:00:00Z',
  api_url: 'https://svc.example',
};

interface Warnings {
  warn: (message: string) => void;
  messages: string[];
}

function collectWarnings(): Warnings {
  const messages: string[] = [];
  return { warn: (message) => messages.push(message), messages };
}

/** Runs `body` with a fresh temporary HOME, removed afterwards. */
async function withHome(body: (home: string) => Promise<void>): Promise<void> {
  const home = await mkdtemp(join(tmpdir(), 'svc-token-store-'));
  try {
    await body(home);
  } finally {
    await rm(home, { recursive: true, force: true });
  }
}

async function modeOf(path: string): Promise<number> {
  return (await stat(path)).mode & 0o777;
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

function assertFileWarning(messages: string[], file: string): void {
  assert.equal(messages.length, 1, `expected one warning, got ${JSON.stringify(messages)}`);
  const [message] = messages;
  assert.match(message ?? '', /no credential store is available/);
  assert.ok(message?.includes(file), `the warning names ${file}: ${message}`);
}

const posix = process.platform !== 'win32';

describe('the token file, when there is no credential store', () => {
  test('when the credential store is turned off, then the token lands in ~/.config/svc/sdk.json, 0600 in a 0700 folder, with one warning naming it', async () => {
    await withHome(async (home) => {
      const { warn, messages } = collectWarnings();
      const store = await openTokenStore({ home, warn, keyring: false });
      const file = join(home, '.config', 'svc', 'sdk.json');
      assert.equal(store.kind, 'file');
      assert.equal(store.file, file);
      assert.equal(tokenFilePath(home), file);

      await store.write(credential);
      assert.deepEqual(JSON.parse(await readFile(file, 'utf8')), credential);
      if (posix) {
        assert.equal(await modeOf(file), 0o600);
        assert.equal(await modeOf(dirname(file)), 0o700);
      }
      assert.deepEqual(await store.read(), credential);
      assert.deepEqual(await store.lookup(), { credential, source: 'file' });
      assert.deepEqual(await store.read(), credential);
      assertFileWarning(messages, file);
    });
  });

  test('when a later run on the same machine stores a token in the file again, then it does not warn again, even after logout', async () => {
    await withHome(async (home) => {
      const first = collectWarnings();
      await (await openTokenStore({ home, warn: first.warn, keyring: false })).write(credential);
      assert.equal(first.messages.length, 1);
      const later = collectWarnings();
      const store = await openTokenStore({ home, warn: later.warn, keyring: false });
      await store.remove();
      await store.write(credential);
      assert.deepEqual(later.messages, []);
    });
  });

  test('when there is no session bus, then the file is the store without being asked for', {
    // Only Linux reaches its credential store through a session bus.
    skip: process.platform !== 'linux',
  }, async () => {
    await withHome(async (home) => {
      // A child with a clean environment: libdbus remembers the bus address once it has
      // connected, so taking DBUS_SESSION_BUS_ADDRESS out of this process would prove nothing.
      // XDG_RUNTIME_DIR goes too, or libdbus would find the bus at $XDG_RUNTIME_DIR/bus.
      const script = `
        const { openTokenStore } = await import(${JSON.stringify(tokenStoreModule)});
        const messages = [];
        const store = await openTokenStore({ home: process.env.HOME, warn: (message) => messages.push(message) });
        await store.write(${JSON.stringify(credential)});
        const read = await store.read();
        process.stdout.write(JSON.stringify({ kind: store.kind, read, messages }));
      `;
      const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        cwd: repoRoot,
        env: { PATH: process.env.PATH, HOME: home },
        encoding: 'utf8',
      });
      assert.equal(child.status, 0, child.stderr);
      const result = JSON.parse(child.stdout) as { kind: string; read: unknown; messages: string[] };
      const file = join(home, '.config', 'svc', 'sdk.json');
      assert.equal(result.kind, 'file');
      assert.deepEqual(result.read, credential);
      assertFileWarning(result.messages, file);
      assert.equal(await modeOf(file), 0o600);
      assert.equal(await modeOf(dirname(file)), 0o700);
    });
  });

  test('when the file is written again, then it is replaced whole, stays 0600, and a looser folder is made 0700', async () => {
    await withHome(async (home) => {
      const file = tokenFilePath(home);
      await mkdir(dirname(file), { recursive: true, mode: 0o755 });
      await chmod(dirname(file), 0o755);
      await writeFile(file, '{"access_token":"svc_old","expires_at":"x","api_url":"y","extra":true}', {
        mode: 0o644,
      });
      await chmod(file, 0o644);
      const store = await openTokenStore({ home, warn: () => {}, keyring: false });

      await store.write(credential);
      assert.deepEqual(JSON.parse(await readFile(file, 'utf8')), credential);
      if (posix) {
        assert.equal(await modeOf(file), 0o600);
        assert.equal(await modeOf(dirname(file)), 0o700);
      }
      // Beside the token, only the marker that the file warning was given.
      assert.deepEqual(
        (await readdir(dirname(file))).sort(),
        ['file-store-warned', 'sdk.json'],
        'no temporary file is left behind',
      );
    });
  });

  for (const [content, what] of [
    ['not json at all', 'not JSON'],
    ['', 'empty'],
    ['null', 'null'],
    ['["svc_token"]', 'an array'],
    ['{"access_token":42,"expires_at":"x","api_url":"y"}', 'a number as the token'],
    ['{"access_token":"","expires_at":"x","api_url":"y"}', 'an empty token'],
    ['{"access_token":"svc_t","api_url":"y"}', 'no expiry'],
  ] as const) {
    test(`when the file holds something else than a credential (${what}), then it reads as none and the next write replaces it`, async () => {
      await withHome(async (home) => {
        const file = tokenFilePath(home);
        await mkdir(dirname(file), { recursive: true });
        await writeFile(file, content);
        const store = await openTokenStore({ home, warn: () => {}, keyring: false });

        assert.equal(await store.read(), undefined);
        assert.equal(await resolveToken({}, store), undefined);
        await store.write(credential);
        assert.deepEqual(await store.read(), credential);
      });
    });
  }

  test('when the token is removed, then the file is gone and remove says so once', async () => {
    await withHome(async (home) => {
      const store = await openTokenStore({ home, warn: () => {}, keyring: false });
      await store.write(credential);

      assert.equal(await store.remove(), true);
      assert.equal(await exists(store.file), false);
      assert.equal(await store.read(), undefined);
      assert.equal(await store.remove(), false);
    });
  });

  test('when nothing was ever stored, then remove finds nothing and creates no folder', async () => {
    await withHome(async (home) => {
      const store = await openTokenStore({ home, warn: () => {}, keyring: false });

      assert.equal(await store.remove(), false);
      assert.equal(await store.read(), undefined);
      assert.equal(await exists(join(home, '.config')), false);
    });
  });

  test('when the credential to store lacks a field, then write refuses it and stores nothing', async () => {
    await withHome(async (home) => {
      const store = await openTokenStore({ home, warn: () => {}, keyring: false });
      const broken = { access_token: 'svc_t', expires_at: 'x' } as unknown as StoredCredential;

      await assert.rejects(store.write(broken), TypeError);
      assert.equal(await exists(store.file), false);
    });
  });
});

describe('SVC_TOKEN and the stored token', () => {
  test('when SVC_TOKEN is set, then it wins over the stored token and the store is not even read', async () => {
    await withHome(async (home) => {
      const { warn, messages } = collectWarnings();
      await (await openTokenStore({ home, warn: () => {}, keyring: false })).write(credential);
      const store = await openTokenStore({ home, warn, keyring: false });

      assert.deepEqual(await resolveToken({ SVC_TOKEN: 'svc_from_env' }, store), {
        token: 'svc_from_env',
        source: 'SVC_TOKEN',
      });
      assert.deepEqual(messages, [], 'no warning about the file when the file is not used');
    });
  });

  test('when SVC_TOKEN is unset, then the stored token is used and says where it came from', async () => {
    await withHome(async (home) => {
      const store = await openTokenStore({ home, warn: () => {}, keyring: false });
      await store.write(credential);

      assert.deepEqual(await resolveToken({}, store), {
        token: credential.access_token,
        source: 'file',
        credential,
      });
    });
  });

  test('when SVC_TOKEN is empty or blank, then it counts as unset', async () => {
    await withHome(async (home) => {
      const store = await openTokenStore({ home, warn: () => {}, keyring: false });
      await store.write(credential);

      assert.equal((await resolveToken({ SVC_TOKEN: '' }, store))?.source, 'file');
      assert.equal((await resolveToken({ SVC_TOKEN: '  \n' }, store))?.source, 'file');
    });
  });

  test('when neither SVC_TOKEN nor a stored token exists, then there is no token', async () => {
    await withHome(async (home) => {
      const store = await openTokenStore({ home, warn: () => {}, keyring: false });

      assert.equal(await resolveToken({}, store), undefined);
    });
  });
});

/**
 * The Secret Service tests write to the keyring for real, so they run only on the private session
 * that cli/test/with-secret-service.sh starts, whose bus address it puts in SVC_TEST_SECRET_SERVICE;
 * a keyring of the user's own is never touched.
 */
const privateBus = process.env.SVC_TEST_SECRET_SERVICE;
const secretServiceReady =
  process.platform === 'linux' && !!privateBus && privateBus === process.env.DBUS_SESSION_BUS_ADDRESS;
const notReady =
  'no private Secret Service: run the tests through cli/test/with-secret-service.sh ' +
  '(needs the Debian packages dbus, gnome-keyring and libsecret-tools)';

function secretServiceTest(name: string, body: () => Promise<void>): void {
  if (secretServiceReady) {
    test(name, body);
  } else if (process.env.SVC_REQUIRE_SECRET_SERVICE === '1') {
    // CI asks for these tests: a Secret Service that did not come up is a failure, not a skip.
    test(name, () => assert.fail(`SVC_REQUIRE_SECRET_SERVICE=1, but there is ${notReady}`));
  } else {
    test.skip(`${name} (skipped: ${notReady})`, body);
  }
}

/** What `secret-tool lookup` finds under the attributes the keyring library writes, or undefined. */
function lookUpInSecretService(): string | undefined {
  const lookup = spawnSync('secret-tool', ['lookup', 'service', keyringService, 'username', keyringAccount], {
    encoding: 'utf8',
  });
  if (lookup.status === 0) return lookup.stdout;
  assert.equal(lookup.stderr, '', 'secret-tool found nothing, and said nothing else');
  return undefined;
}

function clearSecretService(): void {
  spawnSync('secret-tool', ['clear', 'service', keyringService, 'username', keyringAccount]);
  assert.equal(lookUpInSecretService(), undefined);
}

async function callSecretService(method: string, ...args: string[]): Promise<string> {
  const { stdout } = await execFileAsync('dbus-send', [
    '--session',
    '--print-reply=literal',
    '--dest=org.freedesktop.secrets',
    '/org/freedesktop/secrets',
    `org.freedesktop.Secret.Service.${method}`,
    ...args,
  ]);
  return stdout.trim();
}

describe('the Secret Service, on a private session bus', () => {
  secretServiceTest(
    'when a Secret Service is reachable, then the token goes there, under service=svc.sdk and username=default, and no file is written',
    async () => {
      clearSecretService();
      await withHome(async (home) => {
        const { warn, messages } = collectWarnings();
        const store = await openTokenStore({ home, warn });
        assert.equal(store.kind, 'keyring');

        await store.write(credential);
        assert.deepEqual(JSON.parse(lookUpInSecretService() ?? 'null'), credential);
        // secret-tool prints an item's attributes on stderr, the rest on stdout.
        const search = await execFileAsync('secret-tool', ['search', '--all', 'service', keyringService]);
        const item = `${search.stdout}${search.stderr}`;
        assert.match(item, /^attribute\.service = svc\.sdk$/m);
        assert.match(item, /^attribute\.username = default$/m);
        assert.equal(await exists(store.file), false);
        assert.equal(await exists(join(home, '.config')), false);

        assert.deepEqual(await store.lookup(), { credential, source: 'keyring' });
        assert.deepEqual(await resolveToken({}, store), {
          token: credential.access_token,
          source: 'keyring',
          credential,
        });
        assert.deepEqual(await resolveToken({ SVC_TOKEN: 'svc_from_env' }, store), {
          token: 'svc_from_env',
          source: 'SVC_TOKEN',
        });
        assert.deepEqual(messages, []);
      });
    },
  );

  secretServiceTest('when the token is removed, then the Secret Service no longer has it', async () => {
    await withHome(async (home) => {
      const store = await openTokenStore({ home, warn: () => {} });
      await store.write(credential);

      assert.equal(await store.remove(), true);
      assert.equal(lookUpInSecretService(), undefined);
      assert.equal(await store.read(), undefined);
      assert.equal(await store.remove(), false);
    });
  });

  secretServiceTest(
    'when the Secret Service holds something else than a credential, then it reads as none and the next write replaces it',
    async () => {
      await withHome(async (home) => {
        const store = await openTokenStore({ home, warn: () => {} });
        await execFileAsync('sh', [
          '-c',
          `printf 'not json' | secret-tool store --label=junk service ${keyringService} username ${keyringAccount}`,
        ]);
        assert.equal(lookUpInSecretService(), 'not json');

        assert.equal(await store.read(), undefined);
        await store.write(credential);
        assert.deepEqual(await store.read(), credential);
        await store.remove();
      });
    },
  );

  secretServiceTest(
    'when a token was left in the file by a run without a bus, then it is still found, and logout removes it from both places',
    async () => {
      clearSecretService();
      await withHome(async (home) => {
        await (await openTokenStore({ home, warn: () => {}, keyring: false })).write(credential);
        const { warn, messages } = collectWarnings();
        const store = await openTokenStore({ home, warn });

        assert.equal(store.kind, 'keyring');
        assert.deepEqual(await resolveToken({}, store), {
          token: credential.access_token,
          source: 'file',
          credential,
        });

        const newer = { ...credential, access_token: 'svc_newer' };
        await (await openTokenStore({ home, warn: () => {}, keyring: false })).write(credential);
        await store.write(newer);
        assert.equal(await exists(store.file), false, 'a new sign-in leaves no stale copy in the file');
        assert.deepEqual(await store.lookup(), { credential: newer, source: 'keyring' });

        await (await openTokenStore({ home, warn: () => {}, keyring: false })).write(credential);
        assert.equal(await store.remove(), true);
        assert.equal(lookUpInSecretService(), undefined);
        assert.equal(await exists(store.file), false);
        assert.equal(await resolveToken({}, store), undefined);
        assert.deepEqual(messages, [], 'the credential store works, so there is nothing to warn about');
      });
    },
  );

  secretServiceTest(
    'when the Secret Service stops answering, then the token goes to the file once the timeout is over',
    async () => {
      const daemon = Number(process.env.SVC_TEST_SECRET_SERVICE_PID);
      assert.ok(daemon > 0, 'with-secret-service.sh gives the daemon pid in SVC_TEST_SECRET_SERVICE_PID');
      clearSecretService();
      await withHome(async (home) => {
        const { warn, messages } = collectWarnings();
        const store = await openTokenStore({ home, warn, keyringTimeoutMs: 300 });
        assert.equal(store.kind, 'keyring');

        process.kill(daemon, 'SIGSTOP');
        try {
          await store.write(credential);
        } finally {
          process.kill(daemon, 'SIGCONT');
        }
        // D-Bus itself would give up after 2 s with another message: this one is svc's timeout.
        assert.equal(store.kind, 'file');
        assertFileWarning(messages, store.file);
        assert.match(store.fallbackReason ?? '', /did not answer within 0\.3 s/);
        assert.deepEqual(JSON.parse(await readFile(store.file, 'utf8')), credential);
        assert.deepEqual(await store.lookup(), { credential, source: 'file' });
      });
    },
  );

  // Last on purpose: nothing headless can unlock the keyring again short of restarting the daemon.
  secretServiceTest(
    'when the keyring is locked, then svc falls back to the file instead of failing',
    async () => {
      clearSecretService();
      await withHome(async (home) => {
        await (await openTokenStore({ home, warn: () => {} })).write(credential);
        const collection = await callSecretService('ReadAlias', 'string:default');
        await callSecretService('Lock', `array:objpath:${collection}`);
        const { warn, messages } = collectWarnings();
        // The unlock prompt cannot open without a display and is dismissed at once; the timeout
        // only keeps the test from hanging should a prompter answer after all.
        const store = await openTokenStore({ home, warn, keyringTimeoutMs: 5_000 });

        assert.equal(store.kind, 'file');
        assert.equal(await store.read(), undefined, 'the token in the locked keyring is out of reach');
        const newer = { ...credential, access_token: 'svc_newer' };
        await store.write(newer);
        assert.deepEqual(JSON.parse(await readFile(store.file, 'utf8')), newer);
        assert.deepEqual(await store.lookup(), { credential: newer, source: 'file' });
        assertFileWarning(messages, store.file);
        assert.match(store.fallbackReason ?? '', /unlock prompt was dismissed/);
      });
    },
  );
});
