/**
 * Strings no store can hold: a NUL (Postgres text refuses it) or an unpaired UTF-16 surrogate
 * (not Unicode at all; JSON can spell one as `\ud800`, and Postgres json refuses it). The service
 * refuses both in every string of every JSON document it takes, and `svc` in the manifest it packs.
 */
export interface UnstorableText {
  /** JSON Pointer of the string (or of the member whose name is the bad string). */
  pointer: string;
  reason: 'nul' | 'unpaired_surrogate';
}

/** The first string in `value` (member names included) that no store can hold, or undefined. */
export function findUnstorableText(value: unknown, pointer = ''): UnstorableText | undefined {
  if (typeof value === 'string') {
    const reason = unstorable(value);
    return reason && { pointer, reason };
  }
  if (value === null || typeof value !== 'object') return undefined;
  for (const [key, member] of Object.entries(value)) {
    const at = `${pointer}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
    const reason = unstorable(key);
    if (reason) return { pointer: at, reason };
    const found = findUnstorableText(member, at);
    if (found) return found;
  }
  return undefined;
}

/** What a person is told about the string at `pointer`. */
export function describeUnstorableText(found: UnstorableText): string {
  return found.reason === 'nul'
    ? 'holds a NUL character (\\u0000), which no text may hold'
    : 'is not well-formed Unicode: it holds an unpaired surrogate (such as \\ud800)';
}

function unstorable(text: string): UnstorableText['reason'] | undefined {
  if (text.includes('\u0000')) return 'nul';
  // In 'u' mode a surrogate pair is one code point, so only an unpaired half matches.
  if (/\p{Surrogate}/u.test(text)) return 'unpaired_surrogate';
  return undefined;
}
