/** Keys from the real ssh-keygen, and a real ssh-agent, in a temporary folder. */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export function makeKey(dir: string, name: string, options: { type?: string; passphrase?: string } = {}) {
  const path = join(dir, name);
  execFileSync('ssh-keygen', [
    '-q',
    '-t',
    options.type ?? 'ed25519',
    '-N',
    options.passphrase ?? '',
    '-C',
    name,
    '-f',
    path,
  ]);
  return { path, publicLine: readFileSync(`${path}.pub`, 'utf8').trim() };
}

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
