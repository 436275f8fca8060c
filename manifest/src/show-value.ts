const maxShownLength = 80;

/** A value for a message: JSON, cut to 80 characters so that a long or hostile one cannot flood it. */
export function showValue(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > maxShownLength ? `${text.slice(0, maxShownLength)}…" (cut)` : text;
}
