/**
 * The car's network rules, enforced by the browser (DESIGN §11): the app's pages are served with
 * `Content-Security-Policy: connect-src 'self' <manifest.network>`, nothing broader, so a
 * `fetch()` to an origin the manifest does not declare fails in development as in the car. The
 * browser reports each refusal to `report-uri` (sent at once; the Reporting API's `report-to`
 * batches for up to a minute), and the report becomes one line that says what to add.
 */

/** Where the app's pages report what their policy blocked, in the app's origin. */
export const violationReportPath = '/_svc/csp-report';

/** An origin as a browser writes it: `http(s)://host[:port]`, nothing more; else why not. */
export function allowedOriginFault(origin: string): string | undefined {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return `${JSON.stringify(origin)} is not a URL: write an origin such as http://127.0.0.1:8787`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return `${JSON.stringify(origin)} is not an http:// or https:// origin`;
  }
  if (url.origin !== origin) {
    return `${JSON.stringify(origin)} is not an origin as a browser writes it: write "${url.origin}"`;
  }
  return undefined;
}

/** The policy of the app's pages: what the car allows, plus this session's `--allow-origin`s. */
export function appPolicy(options: {
  network: readonly string[];
  allowedOrigins: readonly string[];
  hostOrigin: string;
}): string {
  const connect = ["'self'", ...options.network, ...options.allowedOrigins];
  return [
    `connect-src ${[...new Set(connect)].join(' ')}`,
    // Only the host page may show the app: no other page can frame it and read it.
    `frame-ancestors ${options.hostOrigin}`,
    `report-uri ${violationReportPath}`,
  ].join('; ');
}

export interface NetworkViolation {
  /** The origin the app tried to reach. */
  origin: string;
  /** The directive that refused it (`connect-src`). */
  directive: string;
  /** Where in the app, when the browser says: `app.js:17`. */
  source?: string;
  /** What to do about it, in one sentence. */
  advice: string;
}

/**
 * A browser's report (`application/csp-report`, or the Reporting API's list) as violations; what
 * cannot be read as one is left out. Every string comes from a page and is treated as hostile:
 * only an origin parsed by `URL` and a file name reduced to printable characters come out.
 */
export function readViolationReport(body: unknown, appOrigin: string): NetworkViolation[] {
  const reports = Array.isArray(body) ? body.map((item) => (item as { body?: unknown })?.body) : [body];
  const violations: NetworkViolation[] = [];
  for (const report of reports) {
    const fields = (report as { 'csp-report'?: unknown })?.['csp-report'] ?? report;
    if (typeof fields !== 'object' || fields === null) continue;
    const read = (...names: string[]) => {
      for (const name of names) {
        const value = (fields as Record<string, unknown>)[name];
        if (typeof value === 'string' || typeof value === 'number') return String(value);
      }
      return undefined;
    };
    const blocked = read('blocked-uri', 'blockedURL');
    const directive = (read('effective-directive', 'effectiveDirective', 'violated-directive') ?? '').split(
      ' ',
    )[0];
    let origin: string;
    try {
      origin = new URL(blocked ?? '').origin;
    } catch {
      continue;
    }
    if (origin === 'null' || directive === undefined || !/^[a-z-]+$/.test(directive)) continue;
    const file = read('source-file', 'sourceFile');
    const line = read('line-number', 'lineNumber');
    const source = file ? `${shortSource(file, appOrigin)}${line ? `:${line}` : ''}` : undefined;
    violations.push({ origin, directive, ...(source ? { source } : {}), advice: adviceFor(origin) });
  }
  return violations;
}

function adviceFor(origin: string): string {
  if (origin.startsWith('https://')) {
    return `add "${origin}" to "network" in manifest.json, or the car blocks it too`;
  }
  return `the car allows https:// origins only; for a local backend in development run svc dev --allow-origin ${origin}`;
}

/** The file a report names, in the app's own terms (`app.js`), printable and short. */
function shortSource(file: string, appOrigin: string): string {
  let shown = file;
  try {
    const url = new URL(file);
    shown = url.origin === appOrigin ? url.pathname.slice(1) : `${url.origin}${url.pathname}`;
  } catch {}
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is removed
  return shown.replace(/[\u0000-\u001f\u007f-\u009f]/g, '').slice(0, 200);
}

/** One line for the terminal and the panel. */
export function describeViolation(violation: NetworkViolation): string {
  const where = violation.source ? ` from ${violation.source}` : '';
  return `blocked a connection to ${violation.origin}${where} (${violation.directive}): ${violation.advice}`;
}
