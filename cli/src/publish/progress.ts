/** Upload progress: a live bar on a terminal (bytes, rate, time left), one summary line otherwise. */
import type { Writable } from 'node:stream';

function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

function formatSeconds(seconds: number): string {
  if (!Number.isFinite(seconds)) return '--';
  const s = Math.max(0, Math.round(seconds));
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${s}s`;
}

export interface Progress {
  update(sent: number): void;
  done(): void;
}

export function createProgress(
  stream: Writable & { isTTY?: boolean; columns?: number },
  total: number,
  now = () => Date.now(),
): Progress {
  const started = now();
  let lastDraw = 0;
  const rate = (sent: number) => sent / Math.max((now() - started) / 1000, 0.001);
  const line = (sent: number) => {
    const speed = rate(sent);
    const left = speed > 0 ? (total - sent) / speed : Number.POSITIVE_INFINITY;
    return `${formatBytes(sent)} / ${formatBytes(total)}  ${formatBytes(speed)}/s  ${formatSeconds(left)} left`;
  };
  if (!stream.isTTY) {
    return {
      update() {},
      done() {
        const seconds = (now() - started) / 1000;
        stream.write(
          `uploaded ${formatBytes(total)} in ${seconds.toFixed(1)}s (${formatBytes(rate(total))}/s)\n`,
        );
      },
    };
  }
  return {
    update(sent) {
      if (now() - lastDraw < 100 && sent < total) return;
      lastDraw = now();
      const width = Math.max(10, Math.min(30, (stream.columns ?? 80) - 50));
      const filled = Math.round((sent / Math.max(total, 1)) * width);
      stream.write(`\r[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${line(sent)}\u001b[K`);
    },
    done() {
      stream.write('\n');
    },
  };
}
