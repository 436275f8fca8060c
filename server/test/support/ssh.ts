/** Real keys and signatures from the real `ssh-keygen`, in a temporary folder. */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface KeyFiles {
  privatePath: string;
  publicLine: string;
}

export class SshKit {
  readonly dir = mkdtempSync(join(tmpdir(), 'svc-ssh-'));
  private count = 0;

  makeKey(type: 'ed25519' | 'rsa' | 'ecdsa' = 'ed25519', passphrase = ''): KeyFiles {
    const privatePath = join(this.dir, `key${this.count++}_${type}`);
    const bits = type === 'rsa' ? ['-b', '2048'] : [];
    execFileSync('ssh-keygen', [
      '-q',
      '-t',
      type,
      ...bits,
      '-N',
      passphrase,
      '-C',
      `test@${type}`,
      '-f',
      privatePath,
    ]);
    return { privatePath, publicLine: readFileSync(`${privatePath}.pub`, 'utf8').trim() };
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
    const line = execFileSync('ssh-keygen', ['-l', '-E', 'sha256', '-f', `${key.privatePath}.pub`], {
      encoding: 'utf8',
    });
    return line.split(' ')[1] ?? '';
  }

  cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
