/** Reading the service's Prometheus text in tests (and in bench/ingest.ts). */

/** The value of one sample: its name exactly, holding every label given; 0 when there is none. */
export function sample(text: string, name: string, labels: Record<string, string | number> = {}): number {
  const wanted = Object.entries(labels).map(([key, value]) => `${key}="${value}"`);
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const have = (match[2] ?? '').split(',');
    if (wanted.every((label) => have.includes(label))) return Number(match[3]);
  }
  return 0;
}

/** The Prometheus text a service (or replica) serves on its metrics port right now. */
export async function scrape(service: { metricsUrl: string }): Promise<string> {
  return (await fetch(service.metricsUrl)).text();
}
