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

/**
 * The first string in `value` (member names included), in document order, that no store can hold,
 * or undefined. Walked with a stack of its own, not by recursion: a body nested 100,000 deep must
 * be answered, not overflow the call stack.
 */
export function findUnstorableText(value: unknown, pointer = ''): UnstorableText | undefined {
  const pending: Place[] = [{ value }];
  for (let place = pending.pop(); place; place = pending.pop()) {
    const { value: item, key } = place;
    const reason = (key !== undefined && unstorable(key)) || (typeof item === 'string' && unstorable(item));
    if (reason) return { pointer: pointer + pointerTo(place), reason };
    if (item === null || typeof item !== 'object') continue;
    // Pushed last member first, so that members are looked at in order.
    const members = Object.entries(item);
    for (let i = members.length - 1; i >= 0; i -= 1) {
      const [name, member] = members[i] as [string, unknown];
      pending.push({ value: member, key: name, parent: place });
    }
  }
  return undefined;
}

/** A value in the document, under member name (or index) `key` of its parent; the root has neither. */
interface Place {
  value: unknown;
  key?: string;
  parent?: Place;
}

/** The JSON Pointer of `place`, built only for the one string that is reported. */
function pointerTo(place: Place): string {
  const keys: string[] = [];
  for (let at: Place | undefined = place; at?.key !== undefined; at = at.parent) keys.push(at.key);
  return keys
    .reverse()
    .map((key) => `/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`)
    .join('');
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
