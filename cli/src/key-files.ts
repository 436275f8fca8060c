/** Reading the `.pub` file a developer registers, with messages for the usual mix-ups. */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CliError } from './errors.ts';

export function readPublicKeyFile(path: string, home: string): string {
  const file = path === '~' || path.startsWith('~/') ? join(home, path.slice(1)) : path;
  if (!existsSync(file)) throw new CliError(`there is no file at ${file}: pass the path of a .pub file.`);
  const text = readFileSync(file, 'utf8').trim();
  if (text.includes('PRIVATE KEY')) {
    throw new CliError(
      `${file} is a private key: pass its public half (${file}.pub); only the public key is uploaded.`,
    );
  }
  return text;
}
