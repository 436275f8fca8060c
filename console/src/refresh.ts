/** Lists that follow what others do (a review, a withdrawal): asked for again while the tab is seen. */
import { useEffect, useRef } from 'preact/hooks';

/** How often a page asks again, so a move made elsewhere shows without a reload. */
export const refreshMs = 5000;

/**
 * Calls `load` now and every `refreshMs` while the tab is visible, and at once when it becomes
 * visible again.
 */
export function useRefreshing(load: () => Promise<void>): void {
  const latest = useRef(load);
  latest.current = load;
  useEffect(() => {
    const refresh = () => {
      if (document.visibilityState === 'visible') void latest.current();
    };
    void latest.current();
    const timer = setInterval(refresh, refreshMs);
    document.addEventListener('visibilitychange', refresh);
    return () => {
      clearInterval(timer);
      document.removeEventListener('visibilitychange', refresh);
    };
  }, []);
}

/** Whether a list differs from the one shown before (a refresh brought news). */
export function changed(before: unknown, after: unknown): boolean {
  return before !== undefined && JSON.stringify(before) !== JSON.stringify(after);
}
