/** What the benchmarks share: their settings from the environment, and the statistics they report. */

/**
 * `BENCH_SMOKE=1`: a run of a second or two per step that only shows the benchmark still works
 * (CI runs every one this way); its figures mean nothing. A setting given explicitly still wins.
 */
export const smokeRun = process.env.BENCH_SMOKE === '1';

/** A setting in whole numbers: `name` from the environment, else `fallback` (`smoke` in a smoke run). */
export function positiveInteger(name: string, fallback: number, smoke = fallback): number {
  const raw = process.env[name]?.trim() || String(smokeRun ? smoke : fallback);
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new Error(`${name} must be a positive whole number, not "${raw}"`);
  }
  return value;
}

/** Said first by a smoke run, so that nobody reads its figures as a measurement. */
export function announceSmokeRun(bench: string): void {
  if (smokeRun)
    process.stderr.write(
      `${bench}: smoke run (BENCH_SMOKE=1): it shows the benchmark works; its figures mean nothing\n`,
    );
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
}

/** Nearest-rank percentile of ascending `sorted`. */
export function percentile(sorted: number[], fraction: number): number {
  return sorted[Math.max(0, Math.ceil(fraction * sorted.length) - 1)] ?? Number.NaN;
}

export const pause = (ms: number) => new Promise((done) => setTimeout(done, ms));
