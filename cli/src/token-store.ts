/** Where `svc` keeps its access token: the OS credential store, else a file only the user can read. */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, open, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

/** What `svc login` stores, as JSON; `api_url` lets `whoami` notice a token for another service. */
export interface StoredCredential {
  access_token: string;
  expires_at: string;
  api_url: string;
}

export type StoreKind = 'keyring' | 'file';

export type TokenSource = 'SVC_TOKEN' | StoreKind;

export interface FoundCredential {
  credential: StoredCredential;
  /** Where it was found: a token written to the file before the credential store was usable counts as `file`. */
  source: StoreKind;
}

export interface ResolvedToken {
  token: string;
  source: TokenSource;
  /** The stored credential the token came from; absent for SVC_TOKEN. */
  credential?: StoredCredential;
}

export interface TokenStore {
  /**
   * Where `write` puts the token. Turns from `keyring` to `file` when the credential store fails
   * during the process (it refused a write, stopped answering), so read it after `write`.
   */
  readonly kind: StoreKind;
  /** The fallback file, `<home>/.config/svc/sdk.json`. */
  readonly file: string;
  read(): Promise<StoredCredential | undefined>;
  /** `read`, plus where the credential was found. */
  lookup(): Promise<FoundCredential | undefined>;
  write(credential: StoredCredential): Promise<void>;
  /** Removes the token from the credential store and the file; true when something was removed. */
  remove(): Promise<boolean>;
  /** Why the credential store is not used (its own words), when it is not. */
  readonly fallbackReason: string | undefined;
}

export interface OpenTokenStoreOptions {
  /** The home directory holding `.config/svc/sdk.json`; `os.homedir()` unless given. */
  home?: string;
  /** Called once, on the first use of the file as the store, with a sentence saying so and why. */
  warn: (message: string) => void;
  /** `false` uses the file without asking the credential store (for tests). */
  keyring?: boolean;
  /** How long one call to the credential store may take before the file is used instead. */
  keyringTimeoutMs?: number;
}

/**
 * The credential store entry of SPEC "Token storage": service `svc.sdk`, account `default`. On
 * Linux the library writes the Secret Service item with the attributes `service=svc.sdk` and
 * `username=default` into the `default` collection. On Windows it names the generic credential
 * `default.svc.sdk`; its `withTarget`, which could name it `svc.sdk`, writes an empty secret over
 * the stored one whenever an entry is made (keyring-node src/entry_builder.rs), so it is not used.
 */
export const keyringService = 'svc.sdk';
export const keyringAccount = 'default';

/**
 * The credential store answers in milliseconds, but a locked keyring makes it wait for the user to
 * answer an unlock prompt, for as long as a year. The prompt may be on a screen nobody looks at
 * (svc run over SSH on a desktop whose keyring is locked), so svc gives up after this: long
 * enough to type a password, short enough not to look hung.
 */
const defaultKeyringTimeoutMs = 30_000;

const fileMode = 0o600;
const directoryMode = 0o700;

/** The token file under `home`; SPEC fixes the path, so XDG_CONFIG_HOME is not consulted. */
export function tokenFilePath(home: string): string {
  return join(home, '.config', 'svc', 'sdk.json');
}

/**
 * Opens the OS credential store when it answers a read, else the file. Never throws for the
 * credential store: a native module that fails to load, no session bus, no Secret Service, a
 * locked keyring or a store that does not answer in time all mean the file, with a warning on
 * its first use.
 */
export async function openTokenStore(options: OpenTokenStoreOptions): Promise<TokenStore> {
  const file = tokenFilePath(options.home ?? homedir());
  if (options.keyring === false)
    return new FallbackTokenStore(file, options.warn, undefined, 'turned off for this run');
  try {
    const keyring = await openKeyring(options.keyringTimeoutMs ?? defaultKeyringTimeoutMs);
    return new FallbackTokenStore(file, options.warn, keyring, '');
  } catch (error) {
    return new FallbackTokenStore(file, options.warn, undefined, reasonOf(error));
  }
}

/**
 * The token to send: SVC_TOKEN when set (SPEC "Authentication" 5), else the stored one. With
 * SVC_TOKEN the store is not touched at all, so CI that injects the token sees no warning about
 * a missing credential store. An empty or blank SVC_TOKEN counts as unset.
 */
export async function resolveToken(
  env: NodeJS.ProcessEnv,
  store: TokenStore,
): Promise<ResolvedToken | undefined> {
  const fromEnv = env.SVC_TOKEN?.trim();
  if (fromEnv) return { token: fromEnv, source: 'SVC_TOKEN' };
  const found = await store.lookup();
  if (!found) return undefined;
  return { token: found.credential.access_token, source: found.source, credential: found.credential };
}

interface Keyring {
  get(): Promise<string | undefined>;
  set(secret: string): Promise<void>;
  delete(): Promise<boolean>;
}

async function openKeyring(timeoutMs: number): Promise<Keyring> {
  // Loaded here rather than imported at the top so that a missing or broken native binary
  // (an unsupported platform, a damaged install) costs the file fallback, not the whole CLI.
  const { AsyncEntry } = await import('@napi-rs/keyring');
  // Pinned to the Secret Service on Linux: left to itself the library silently falls back to the
  // kernel keyring, which forgets the token at reboot and is not the store SPEC names; the file
  // is. (The option is ignored on macOS and Windows.) The constructor is synchronous and talks to
  // D-Bus, but D-Bus gives up after 2 s when the service does not answer.
  const entry = new AsyncEntry(keyringService, keyringAccount, { linux: { store: 'secret-service' } });
  // AsyncEntry runs each call on libuv's thread pool, so a call blocked on an unlock prompt does
  // not block the event loop and the timeout below can fire.
  const keyring: Keyring = {
    get: async () => (await withinTime((signal) => entry.getPassword(signal), timeoutMs)) ?? undefined,
    set: (secret) => withinTime((signal) => entry.setPassword(secret, signal), timeoutMs),
    delete: () => withinTime((signal) => entry.deletePassword(signal), timeoutMs),
  };
  // "No entry" answers null and means the store works; a store that cannot be read throws.
  await keyring.get();
  return keyring;
}

/**
 * `call`, or a rejection once `timeoutMs` has passed. The native call cannot be interrupted once
 * it runs, and until it returns it keeps the process alive, so the CLI should end with
 * `process.exit` rather than wait for the event loop to drain. The signal still cancels calls
 * queued behind the blocked one, which would otherwise write to the store after svc moved on.
 */
async function withinTime<T>(call: (signal: AbortSignal) => Promise<T>, timeoutMs: number): Promise<T> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(
        new Error(`it did not answer within ${timeoutMs / 1000} s; is it waiting for an unlock prompt?`),
      );
    }, timeoutMs);
  });
  try {
    return await Promise.race([call(controller.signal), late]);
  } finally {
    clearTimeout(timer);
  }
}

class FallbackTokenStore implements TokenStore {
  readonly file: string;
  readonly #warn: (message: string) => void;
  /** Undefined once the credential store is out of use, for good in this process. */
  #keyring: Keyring | undefined;
  #fallbackReason: string;
  #warned = false;

  constructor(
    file: string,
    warn: (message: string) => void,
    keyring: Keyring | undefined,
    fallbackReason: string,
  ) {
    this.file = file;
    this.#warn = warn;
    this.#keyring = keyring;
    this.#fallbackReason = fallbackReason;
  }

  get kind(): StoreKind {
    return this.#keyring ? 'keyring' : 'file';
  }

  async read(): Promise<StoredCredential | undefined> {
    return (await this.lookup())?.credential;
  }

  async lookup(): Promise<FoundCredential | undefined> {
    if (this.#keyring) {
      try {
        const credential = parseCredential(await this.#keyring.get());
        if (credential) return { credential, source: 'keyring' };
      } catch (error) {
        this.#fallBack(error);
      }
    }
    // Read even when the credential store works: a token written while it was unusable (an
    // earlier run without a session bus) is still the user's sign-in.
    const credential = parseCredential(await readTokenFile(this.file));
    return credential && { credential, source: 'file' };
  }

  async write(credential: StoredCredential): Promise<void> {
    if (!isStoredCredential(credential)) {
      throw new TypeError('a stored credential needs the strings access_token, expires_at and api_url');
    }
    const picked = pickCredential(credential);
    if (this.#keyring) {
      let stored = false;
      try {
        await this.#keyring.set(JSON.stringify(picked));
        stored = true;
      } catch (error) {
        this.#fallBack(error);
      }
      if (stored) {
        // A token left in the file by an earlier fallback is stale now: leave no copy in clear
        // text. Best effort, as the new token is stored and reads look at the keyring first.
        await removeTokenFile(this.file).catch(() => false);
        return;
      }
    }
    const warn = await this.#fileWarningDue();
    await writeTokenFile(this.file, `${JSON.stringify(picked, null, 2)}\n`);
    if (warn) await this.#warnFileIsTheStore();
  }

  async remove(): Promise<boolean> {
    let removed = false;
    if (this.#keyring) {
      try {
        removed = await this.#keyring.delete();
      } catch (error) {
        this.#fallBack(error);
      }
    }
    // Both places: `svc logout` must not leave a token that a later read would find.
    const removedFile = await removeTokenFile(this.file);
    return removed || removedFile;
  }

  get fallbackReason(): string | undefined {
    return this.#keyring ? undefined : this.#fallbackReason;
  }

  #fallBack(error: unknown): void {
    this.#keyring = undefined;
    this.#fallbackReason = reasonOf(error);
  }

  /**
   * Said when a token lands in the file, not on reads: that is when it matters. Once per machine
   * (a marker beside the file remembers it); `svc whoami` reminds where the token is.
   */
  async #fileWarningDue(): Promise<boolean> {
    if (this.#keyring || this.#warned) return false;
    return !(await stat(this.#warnedMarker).then(
      () => true,
      () => false,
    ));
  }

  async #warnFileIsTheStore(): Promise<void> {
    this.#warned = true;
    this.#warn(
      // The store's own reason (a D-Bus error, say) means little to most users; `fallbackReason` has it.
      `no credential store is available, so the token is stored in the file ${this.file}, readable only by you`,
    );
    await writeFile(this.#warnedMarker, 'svc said once that tokens are kept in sdk.json here.\n', {
      mode: 0o600,
    }).catch(() => undefined);
  }

  get #warnedMarker(): string {
    return join(dirname(this.file), 'file-store-warned');
  }
}

function isStoredCredential(value: unknown): value is StoredCredential {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const { access_token, expires_at, api_url } = value as Record<string, unknown>;
  return (
    typeof access_token === 'string' &&
    access_token !== '' &&
    typeof expires_at === 'string' &&
    typeof api_url === 'string'
  );
}

function pickCredential({ access_token, expires_at, api_url }: StoredCredential): StoredCredential {
  return { access_token, expires_at, api_url };
}

/** A stored text as a credential; anything else (not JSON, another shape) reads as none and is overwritten later. */
function parseCredential(text: string | undefined): StoredCredential | undefined {
  if (text === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  return isStoredCredential(value) ? pickCredential(value) : undefined;
}

async function readTokenFile(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    if (isMissing(error)) return undefined;
    throw error;
  }
}

/**
 * Writes the token file atomically: a temporary file in the same directory, created 0600 so the
 * token is never readable by others even for a moment, then renamed over the old one, so a reader
 * sees the old token or the new one and never half of one.
 */
async function writeTokenFile(file: string, text: string): Promise<void> {
  const directory = dirname(file);
  await mkdir(directory, { recursive: true, mode: directoryMode });
  // mkdir leaves an existing directory as it is; one others can list or write to is made private.
  if (((await stat(directory)).mode & 0o077) !== 0) await chmod(directory, directoryMode);
  const temporary = join(directory, `.sdk.json.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    const handle = await open(temporary, 'wx', fileMode);
    try {
      // The umask may have narrowed the mode at creation; this states it whatever the umask.
      await handle.chmod(fileMode);
      await handle.writeFile(text, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, file);
  } catch (error) {
    await unlink(temporary).catch(() => undefined);
    throw error;
  }
}

async function removeTokenFile(file: string): Promise<boolean> {
  try {
    await unlink(file);
    return true;
  } catch (error) {
    if (isMissing(error)) return false;
    throw error;
  }
}

function isMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/** The first line of an error's message, for the warning: enough to act on without a stack. */
function reasonOf(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split('\n', 1)[0]?.trim() || 'unknown error';
}
