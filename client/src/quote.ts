/** Untrusted values as error messages show them: quoted, cut short, nothing invisible or look-alike. */

/** Longest echo of an input in an error message, counted after escaping so it bounds the message. */
const maxEchoedLength = 80;

/** A string for a message: quoted, cut to maxEchoedLength, everything outside printable ASCII escaped. */
export function quote(text: string): string {
  let shown = '';
  for (const char of text) {
    if (shown.length >= maxEchoedLength) return `"${shown}..." (cut, ${text.length} characters in all)`;
    shown += escapeChar(char);
  }
  return `"${shown}"`;
}

/** Escaping non-ASCII too makes look-alikes visible: a Cyrillic `А` prints as \u0410, not as `A`. */
function escapeChar(char: string): string {
  if (char === '"' || char === '\\') return `\\${char}`;
  const codePoint = char.codePointAt(0) ?? 0;
  if (codePoint >= 0x20 && codePoint <= 0x7e) return char;
  if (char === '\n') return '\\n';
  if (char === '\r') return '\\r';
  if (char === '\t') return '\\t';
  const hex = codePoint.toString(16).padStart(4, '0');
  return codePoint > 0xffff ? `\\u{${hex}}` : `\\u${hex}`;
}

export function describe(value: unknown): string {
  if (typeof value === 'string') return quote(value);
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a value of type ${typeof value}`;
}
