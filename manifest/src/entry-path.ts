import { showValue } from './show-value.ts';

/**
 * Why `entry` is not written as the package stores the path (`app/index.html`, not
 * `./app/index.html` or `app\index.html`), or undefined. Whether the package holds that file is
 * each side's to say: svc looks in the folder, the service in the archive.
 */
export function entryPathFault(entry: string): string | undefined {
  const shown = showValue(entry);
  if (entry.includes('\\')) return `${shown} must use "/" between folders`;
  if (entry.startsWith('/')) return `${shown} must be relative to the package folder, such as "index.html"`;
  const segments = entry.split('/');
  if (segments.includes('..')) return `${shown} leads outside the package folder: name a file inside it`;
  if (segments.some((segment) => segment === '' || segment === '.')) {
    const plain = segments.filter((segment) => segment !== '' && segment !== '.').join('/');
    return `${shown} must be a plain path inside the package${plain ? `: write "${plain}"` : ''}`;
  }
  if (entry.includes('\0')) return `${shown} holds a NUL character`;
  return undefined;
}
