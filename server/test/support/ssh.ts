/**
 * Real keys and signatures from the real `ssh-keygen`, and a real `ssh-agent`, in temporary
 * folders: the one SSH support of the server's, the CLI's and the console's tests.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export type KeyType = 'ed25519' | 'rsa' | 'ecdsa';

/** A key pair `ssh-keygen` wrote as `dir/name` and `dir/name.pub`; `name` is its comment too. */
export function makeKey(
  dir: string,
  name: string,
  options: { type?: KeyType; passphrase?: string; comment?: string } = {},
): { path: string; publicLine: string } {
  const path = join(dir, name);
  const type = options.type ?? 'ed25519';
  // 2048 bits, not ssh-keygen's 3072: an RSA key is only ever made to be refused or listed, and
  // the larger one takes seconds on a loaded machine.
  const bits = type === 'rsa' ? ['-b', '2048'] : [];
  execFileSync('ssh-keygen', [
    '-q',
    '-t',
    type,
    ...bits,
    '-N',
    options.passphrase ?? '',
    '-C',
    options.comment ?? name,
    '-f',
    path,
  ]);
  return { path, publicLine: readFileSync(`${path}.pub`, 'utf8').trim() };
}

/** A real ssh-agent listening on `dir/agent.sock`, and `ssh-add` into it. */
export async function startAgent(
  dir: string,
): Promise<{ socket: string; child: ChildProcess; add(path: string): void }> {
  const socket = join(dir, 'agent.sock');
  const child = spawn('ssh-agent', ['-D', '-a', socket], { stdio: 'ignore' });
  for (let i = 0; i < 100 && !existsSync(socket); i++) await new Promise((r) => setTimeout(r, 50));
  return {
    socket,
    child,
    add: (path) =>
      execFileSync('ssh-add', ['-q', path], {
        env: { ...process.env, SSH_AUTH_SOCK: socket },
        stdio: 'ignore',
      }),
  };
}

/** A key as `GET /api/v1/dev/keys` lists it, for stand-ins of the service. */
export function sshKeyRecord(id: string) {
  return {
    id,
    type: 'ssh-ed25519',
    fingerprint: 'SHA256:x',
    title: 'laptop',
    public_key: 'ssh-ed25519 AAAA',
    created_at: '2026-11-21T09:00:00Z',
    last_used_at: null,
  };
}

export interface KeyFiles {
  privatePath: string;
  publicLine: string;
}

/** Keys, signatures and fingerprints in one temporary folder of a test file's own. */
export class SshKit {
  readonly dir = mkdtempSync(join(tmpdir(), 'svc-ssh-'));
  private count = 0;

  makeKey(type: KeyType = 'ed25519', passphrase = ''): KeyFiles {
    const { path, publicLine } = makeKey(this.dir, `key${this.count++}_${type}`, {
      type,
      passphrase,
      comment: `test@${type}`,
    });
    return { privatePath: path, publicLine };
  }

  /** `ssh-keygen -Y sign -n <namespace>` over `message`, as a developer would by hand. */
  sign(key: KeyFiles, message: string, namespace = 'svc-login'): string {
    const messagePath = join(this.dir, `message${this.count++}`);
    writeFileSync(messagePath, message);
    execFileSync('ssh-keygen', ['-q', '-Y', 'sign', '-n', namespace, '-f', key.privatePath, messagePath]);
    return readFileSync(`${messagePath}.sig`, 'utf8');
  }

  /** `SHA256:…` as `ssh-keygen -l` prints it. */
  fingerprint(key: KeyFiles): string {
    return fingerprintOf(`${key.privatePath}.pub`);
  }

  cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The `SHA256:…` fingerprint of a public key file, as `ssh-keygen -l` prints it. */
export function fingerprintOf(publicKeyPath: string): string {
  const line = execFileSync('ssh-keygen', ['-l', '-E', 'sha256', '-f', publicKeyPath], { encoding: 'utf8' });
  return line.split(' ')[1] ?? '';
}
