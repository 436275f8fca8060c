/** Report rates on the command line: `200ms`, `1s`, `1.5s`, `2m`. */

const unitMs = { ms: 1, s: 1000, m: 60_000 } as const;

/** The duration in milliseconds, or undefined when `text` is not a positive duration. */
export function parseDuration(text: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m)$/.exec(text.trim());
  if (!match) return undefined;
  const ms = Number(match[1]) * unitMs[match[2] as keyof typeof unitMs];
  // Below a millisecond a timer cannot tell the difference; zero would mean a busy loop.
  return ms >= 1 ? Math.round(ms) : undefined;
}

export function formatDuration(ms: number): string {
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}
