/**
 * The armor of OpenSSH's text files (`-----BEGIN <label>-----`, base64, `-----END <label>-----`),
 * as private key files and SSHSIG signatures wear it, and the strict base64 inside it.
 */
import { Buffer } from 'node:buffer';

/** ssh-keygen wraps armored base64 at 70 columns; the same width makes our output byte-identical. */
const armorLineWidth = 70;

/** Base64 as OpenSSH writes it; anything Buffer.from would tolerate but not write back is refused. */
export function decodeBase64(text: string): Buffer | undefined {
  if (text.length === 0 || text.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(text)) return undefined;
  const bytes = Buffer.from(text, 'base64');
  return bytes.toString('base64') === text ? bytes : undefined;
}

/** The bytes between `-----BEGIN <label>-----` and `-----END <label>-----`, the whole text but for whitespace. */
export function dearmor(text: string, label: string): Buffer | undefined {
  const lines = text.trim().split(/\r?\n/);
  if (
    lines.length < 3 ||
    lines[0] !== `-----BEGIN ${label}-----` ||
    lines.at(-1) !== `-----END ${label}-----`
  ) {
    return undefined;
  }
  return decodeBase64(
    lines
      .slice(1, -1)
      .map((line) => line.trim())
      .join(''),
  );
}

export function armor(bytes: Buffer, label: string): string {
  const base64 = bytes.toString('base64');
  const lines = [`-----BEGIN ${label}-----`];
  for (let start = 0; start < base64.length; start += armorLineWidth) {
    lines.push(base64.slice(start, start + armorLineWidth));
  }
  lines.push(`-----END ${label}-----`, '');
  return lines.join('\n');
}
