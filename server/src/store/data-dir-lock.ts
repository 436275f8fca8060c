/**
 * One process at a time on an embedded data folder: PGlite is a database in a folder, and two
 * processes opening it each see only their own writes (and lose them). The lock is a file holding
 * the owner's pid, made with O_EXCL (atomic), removed on a clean stop, and taken over when its
 * owner has died (a crash or SIGKILL leaves it behind).
 */
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export class DataDirInUse extends Error {
  override readonly name = 'DataDirInUse';
  readonly pid: number;
  readonly lockFile: string;

  constructor(dataDir: string, pid: number, lockFile: string) {
    super(
      `DATA_DIR ${dataDir} is in use by another svc (pid ${pid}): stop it first, or give this one ` +
        `another DATA_DIR (or a DATABASE_URL). If no svc runs as pid ${pid}, remove ${lockFile}.`,
    );
    this.pid = pid;
    this.lockFile = lockFile;
  }
}

export interface DataDirLock {
  readonly file: string;
  /** Removes the lock if it is still ours; safe to call more than once. */
  release(): void;
}

// A takeover lives for microseconds; one older than this was left by a process that died in it.
const staleTakeoverMs = 10_000;

export function lockFileOf(dataDir: string): string {
  return join(dataDir, 'svc.lock');
}

/** The pid holding `dataDir`, when a live process holds it. */
export function dataDirHolder(dataDir: string, pid = process.pid): number | undefined {
  const holder = readHolder(lockFileOf(dataDir));
  return holder !== undefined && holder !== pid && isAlive(holder) ? holder : undefined;
}

/** Takes the lock of `dataDir` for this process, or throws `DataDirInUse`. */
export function lockDataDir(dataDir: string, pid = process.pid): DataDirLock {
  mkdirSync(dataDir, { recursive: true });
  const file = lockFileOf(dataDir);
  for (let attempt = 0; attempt < 5; attempt += 1) {
    if (tryCreate(file, pid)) return ownLock(file, pid);
    const holder = readHolder(file);
    if (holder !== undefined && isAlive(holder)) throw new DataDirInUse(dataDir, holder, file);
    if (holder === undefined && justMade(file)) {
      // Made an instant ago by a start that has not written its pid yet.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
      continue;
    }
    takeOverFrom(file, holder);
  }
  throw new Error(`could not take ${file}: it keeps changing hands`);
}

function ownLock(file: string, pid: number): DataDirLock {
  let released = false;
  return {
    file,
    release() {
      if (released) return;
      released = true;
      if (readHolder(file) === pid) rmSync(file, { force: true });
    },
  };
}

function tryCreate(file: string, pid: number): boolean {
  try {
    writeFileSync(file, `${pid}\n`, { flag: 'wx', mode: 0o600 });
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
}

/**
 * Removes a lock whose owner is dead. Two starts may find the same dead owner at once; the
 * takeover file (O_EXCL too) lets one of them remove it, after checking it still names that owner.
 */
function takeOverFrom(file: string, deadHolder: number | undefined): void {
  const takeover = `${file}.takeover`;
  try {
    writeFileSync(takeover, `${process.pid}\n`, { flag: 'wx', mode: 0o600 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    const age = Date.now() - (statSync(takeover, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
    if (age > staleTakeoverMs) rmSync(takeover, { force: true });
    return; // another start is taking over; try again
  }
  try {
    if (readHolder(file) === deadHolder) rmSync(file, { force: true });
  } finally {
    rmSync(takeover, { force: true });
  }
}

function justMade(file: string): boolean {
  const made = statSync(file, { throwIfNoEntry: false })?.mtimeMs;
  return made !== undefined && Date.now() - made < 2_000;
}

function readHolder(file: string): number | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  const pid = Number(text.trim());
  return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, as another user's process.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
