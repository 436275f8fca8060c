/**
 * `svc dev`'s servers (DESIGN §11), both on 127.0.0.1 and neither ever calling the service:
 *
 * - the host's origin (port 5170 unless taken): the host page with the app's frame and the
 *   panel of the simulated car, the host bridge's bundle, the panel's state and its changes, a
 *   stream of events (a change of the car, the manifest's problems, a blocked connection, a
 *   reload), identity tokens signed with this machine's dev key, and that key's JWKS;
 * - the app's origin (the next free port): the app's files, only those `svc publish` would pack,
 *   each page under the car's network rules (network-rules.ts), the runtime at `/_svc/sdk.js` as
 *   a car's host serves it, and where the browser reports what the rules blocked.
 *
 * Two origins, because the host bridge answers an app only on another origin than the host page's
 * (an app in the host's origin could reach into the host page). Every request must name the
 * server by the address it listens on (`Host`), so that a web page whose name was pointed at
 * 127.0.0.1 (DNS rebinding) cannot read either; what changes state or signs a token must also come
 * from the host page's own origin.
 */
import { type FSWatcher, watch } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname } from 'node:path';
import { ignoreFileName } from '@svc/manifest';
import { validateDeviceId } from '@svc/sdk';
import { CliError } from '../errors.ts';
import { type AppFolderState, appFilePath, readAppFolder } from './app-folder.ts';
import { devAsset } from './dev-assets.ts';
import { type DevSigningKey, devIssuer, signDevToken } from './dev-key.ts';
import {
  appPolicy,
  describeViolation,
  type NetworkViolation,
  readViolationReport,
  violationReportPath,
} from './network-rules.ts';
import {
  brandWarning,
  CarChangeError,
  carModels,
  changeCar,
  newCar,
  type SimulatedCar,
} from './simulated-car.ts';

export interface DevServerOptions {
  /** The mini-app's folder. */
  dir: string;
  /** The host page's port; the next free one when taken. */
  port: number;
  deviceId: string;
  locale: string;
  /** Origins the app may reach in this session beyond its manifest's (`--allow-origin`). */
  allowedOrigins: readonly string[];
  key: DevSigningKey;
  /** `svc dev <version>`: the host version the car reports. */
  hostVersion: string;
  /** Each line the terminal shows while it runs (a change, a problem, a blocked connection). */
  log: (line: string) => void;
  /** How long the folder must stay quiet after a change before it is read again, in ms. */
  settleMs?: number;
}

export interface DevServer {
  hostUrl: string;
  appUrl: string;
  hostPort: number;
  appPort: number;
  /** What is served now. */
  folder(): AppFolderState;
  close(): Promise<void>;
}

/** What the panel is told, whole, whenever something changes. */
interface PanelState {
  appUrl: string;
  appId: string | undefined;
  entry: string | undefined;
  car: SimulatedCar;
  models: ReturnType<typeof carModels>;
  problems: string[];
  /** The car is of a brand the manifest does not list (brandWarning); null when it is listed. */
  brandWarning: string | null;
  network: readonly string[];
  allowedOrigins: readonly string[];
  jwksUrl: string;
  issuer: string;
}

/** Ports tried after the one asked for before giving up. */
const portTries = 50;
/** The largest request body read: a car change, a token request, a browser's report. */
const maxBodyBytes = 64 * 1024;

const contentTypes: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.htm': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.txt': 'text/plain; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.avif': 'image/avif',
  '.ico': 'image/x-icon',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.wasm': 'application/wasm',
  '.mp3': 'audio/mpeg',
  '.mp4': 'video/mp4',
  '.webm': 'video/webm',
};

export async function startDevServer(options: DevServerOptions): Promise<DevServer> {
  const { dir, key, log } = options;
  let folder = readAppFolder(dir);
  let car = newCar(options.deviceId, options.locale, new Date());
  const events = new Set<ServerResponse>();
  let hostServer: Server | undefined;
  let appServer: Server | undefined;
  let hostOrigin = '';
  let appOrigin = '';

  const panelState = (): PanelState => ({
    appUrl: appOrigin,
    appId: folder.manifest?.id,
    entry: folder.manifest?.entry,
    car,
    models: carModels(car, folder.manifest, options.hostVersion),
    problems: folder.problems,
    brandWarning: brandWarning(car, folder.manifest) ?? null,
    network: folder.manifest?.network ?? [],
    allowedOrigins: options.allowedOrigins,
    jwksUrl: `${hostOrigin}/.well-known/jwks.json`,
    issuer: devIssuer,
  });

  const broadcast = (event: string, data: unknown) => {
    const frame = `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
    for (const stream of events) stream.write(frame);
  };

  const reportProblems = (problems: readonly string[]) => {
    if (problems.length === 0) return;
    log(
      `the app has ${problems.length === 1 ? 'a problem' : `${problems.length} problems`}; svc publish would refuse it:`,
    );
    for (const problem of problems) log(`  ${problem}`);
  };

  /** The brand warning last said; said again only when it changes (another car, another list). */
  let brandSaid: string | undefined;
  const reportBrand = () => {
    // A manifest with problems lists no brands to go by: its problems are said instead.
    if (!folder.manifest) return;
    const warning = brandWarning(car, folder.manifest);
    if (warning === brandSaid) return;
    if (warning) log(`warning: ${warning}`);
    else log(`the car ${car.deviceId} is of a brand manifest.json lists`);
    brandSaid = warning;
  };

  // ---- the host's origin ----
  async function serveHost(request: IncomingMessage, response: ServerResponse, path: string) {
    const method = request.method ?? 'GET';
    if (path === '/' || path === '/index.html') return sendAsset(response, 'host.html');
    if (path === '/_svc/panel.js') return sendAsset(response, 'panel.js');
    if (path === '/_svc/panel.css') return sendAsset(response, 'panel.css');
    if (path === '/_svc/host.js') return sendAsset(response, 'host.browser.js');
    // Browsers ask for one; the host page has none to show.
    if (path === '/favicon.ico') return void response.writeHead(204).end();
    if (path === '/.well-known/jwks.json') {
      // Any backend in development may fetch it, from a page or a server.
      response.setHeader('access-control-allow-origin', '*');
      return sendJson(response, 200, { keys: [key.publicJwk] });
    }
    if (path === '/_svc/state' && method === 'GET') return sendJson(response, 200, panelState());
    if (path === '/_svc/events' && method === 'GET') {
      response.writeHead(200, {
        'content-type': 'text/event-stream',
        'cache-control': 'no-store',
        connection: 'keep-alive',
      });
      response.write(`event: state\ndata: ${JSON.stringify(panelState())}\n\n`);
      events.add(response);
      request.on('close', () => events.delete(response));
      return;
    }
    if (path === '/_svc/car' && method === 'POST') {
      if (!fromHostPage(request)) return refuseCrossOrigin(response);
      const change = await readJson(request);
      try {
        const before = car;
        car = changeCar(car, change, new Date());
        if (car.deviceId !== before.deviceId) log(`the active car is now ${car.deviceId}`);
        if (car.locale !== before.locale) log(`the locale is now ${car.locale}`);
        reportBrand();
      } catch (error) {
        if (!(error instanceof CarChangeError)) throw error;
        return sendJson(response, 422, { field: error.field, message: error.message });
      }
      broadcast('state', panelState());
      return sendJson(response, 200, panelState());
    }
    if (path === '/_svc/identity-token' && method === 'POST') {
      if (!fromHostPage(request)) return refuseCrossOrigin(response);
      const manifest = folder.manifest;
      if (!manifest) {
        return sendJson(response, 409, { message: 'the manifest has problems: fix them for a token' });
      }
      const { brand } = validateDeviceId(car.deviceId);
      const token = signDevToken(key, {
        deviceId: car.deviceId,
        brand,
        appId: manifest.id,
        locale: car.locale,
      });
      return sendJson(response, 200, token);
    }
    return sendJson(response, 404, { message: `nothing at ${path}` });
  }

  /** A state change or a token: only the host page, from its own origin. */
  function fromHostPage(request: IncomingMessage): boolean {
    return request.headers.origin === hostOrigin;
  }

  // ---- the app's origin ----
  async function serveApp(request: IncomingMessage, response: ServerResponse, path: string) {
    const method = request.method ?? 'GET';
    if (path === violationReportPath && method === 'POST') {
      // Only as a browser sends them: a page of another site cannot send these types without a
      // preflight (which is not answered), so it cannot plant advice to allow its origin.
      const type = (request.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
      if (type !== 'application/csp-report' && type !== 'application/reports+json') {
        return sendJson(response, 415, {
          message: 'reports come from the browser, as application/csp-report',
        });
      }
      const violations = readViolationReport(await readJson(request).catch(() => undefined), appOrigin);
      for (const violation of violations) reportViolation(violation);
      response.writeHead(204).end();
      return;
    }
    if (method !== 'GET' && method !== 'HEAD') {
      response.setHeader('allow', 'GET, HEAD');
      return sendJson(response, 405, { message: `${method} is not served: the app's files are GET only` });
    }
    if (path === '/_svc/sdk.js') return sendAsset(response, 'runtime.browser.js');
    const file = path === '/' ? folder.manifest?.entry : path.slice(1);
    if (file === undefined || !folder.files.has(file)) {
      const leftOut = file === undefined ? undefined : leftOutReason(folder, file);
      const shown = file === undefined ? '' : printable(file);
      const message = leftOut
        ? `${shown} is not served: ${leftOut}, so svc publish would not ship it`
        : file === undefined
          ? 'the manifest has problems: fix them and the entry page is served'
          : `${shown} is not in the app's folder${folder.problems.length > 0 ? ' (or the folder has problems: see the terminal)' : ''}`;
      if (leftOut) log(message);
      response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });
      response.end(`${message}\n`);
      return;
    }
    let bytes: Buffer;
    try {
      bytes = await readFile(appFilePath(dir, file));
    } catch {
      response
        .writeHead(404, { 'content-type': 'text/plain; charset=utf-8' })
        .end(`${printable(file)} is gone\n`);
      return;
    }
    response.writeHead(200, {
      'content-type': contentTypes[extname(file).toLowerCase()] ?? 'application/octet-stream',
      'content-security-policy': appPolicy({
        network: folder.manifest?.network ?? [],
        allowedOrigins: options.allowedOrigins,
        hostOrigin,
      }),
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
    });
    response.end(method === 'HEAD' ? undefined : bytes);
  }

  /** The same refusal is said once a folder read, not on every retry of the app. */
  let violationsSaid = new Set<string>();
  function reportViolation(violation: NetworkViolation) {
    const line = describeViolation(violation);
    broadcast('violation', { ...violation, line });
    if (violationsSaid.has(line)) return;
    violationsSaid.add(line);
    log(line);
  }

  // ---- both ----
  function handler(origin: () => string, serve: typeof serveHost) {
    return (request: IncomingMessage, response: ServerResponse) => {
      const { host, port } = new URL(origin());
      const asked = request.headers.host;
      if (asked !== host) {
        // The same server by its other loopback name: sent to the name it answers as.
        if (asked === `localhost:${port}` || (port === '' && asked === 'localhost')) {
          response.writeHead(307, { location: `${origin()}${request.url ?? '/'}` }).end();
          return;
        }
        response.writeHead(421, { 'content-type': 'text/plain; charset=utf-8' });
        response.end(`this dev-server answers only as ${origin()}\n`);
        return;
      }
      let path: string;
      try {
        path = decodeURIComponent(new URL(request.url ?? '/', origin()).pathname);
      } catch {
        return sendJson(response, 400, { message: 'the path is not valid percent-encoding' });
      }
      serve(request, response, path).catch((error: unknown) => {
        if (error instanceof BodyError) return sendJson(response, error.status, { message: error.message });
        log(
          `could not answer ${request.method} ${path}: ${error instanceof Error ? error.message : String(error)}`,
        );
        if (!response.headersSent)
          sendJson(response, 500, { message: 'the dev-server failed: see its terminal' });
        else response.destroy();
      });
    };
  }

  let hostPort = 0;
  let appPort = 0;
  hostServer = createServer(handler(() => hostOrigin, serveHost));
  appServer = createServer(handler(() => appOrigin, serveApp));
  try {
    hostPort = await listenFrom(hostServer, options.port);
    hostOrigin = new URL(`http://127.0.0.1:${hostPort}`).origin;
    appPort = await listenFrom(appServer, hostPort + 1);
    appOrigin = new URL(`http://127.0.0.1:${appPort}`).origin;
  } catch (error) {
    hostServer.close();
    appServer.close();
    throw error;
  }
  reportProblems(folder.problems);
  reportBrand();

  // Reload on save: the file system says what changed (no polling); a burst of changes (an
  // editor's save, a build) is read once it settles. Only the folders the package reads are
  // watched, each on its own: a recursive watch would also watch every folder of node_modules
  // (tens of thousands, past many systems' inotify limit).
  let settle: NodeJS.Timeout | undefined;
  const settleMs = options.settleMs ?? 80;
  const watchers = new Map<string, FSWatcher>();
  const changed = (folderPath: string, name: string | Buffer | null) => {
    const path = typeof name === 'string' ? (folderPath === '' ? name : `${folderPath}/${name}`) : undefined;
    // A file the package leaves out is no news, unless it is the list of what to leave out.
    if (path !== undefined && path !== ignoreFileName && leftOutReason(folder, path) !== undefined) return;
    clearTimeout(settle);
    settle = setTimeout(reread, settleMs);
  };
  const watchFolders = () => {
    for (const [path, watcher] of watchers) {
      if (!folder.folders.includes(path)) {
        watcher.close();
        watchers.delete(path);
      }
    }
    for (const path of folder.folders) {
      if (watchers.has(path)) continue;
      try {
        const watcher = watch(path === '' ? dir : appFilePath(dir, path), (_event, name) =>
          changed(path, name),
        );
        watcher.on('error', () => {
          watcher.close();
          watchers.delete(path);
        });
        watchers.set(path, watcher);
      } catch (error) {
        if (path === '') log(`cannot watch ${dir} for changes: ${(error as Error).message}`);
      }
    }
  };
  const reread = () => {
    const before = folder;
    folder = readAppFolder(dir);
    watchFolders();
    violationsSaid = new Set();
    if (folder.problems.join('\n') !== before.problems.join('\n')) {
      if (folder.problems.length === 0) log('the app has no problems now');
      else reportProblems(folder.problems);
    }
    reportBrand();
    broadcast('state', panelState());
    broadcast('reload', { at: new Date().toISOString() });
  };
  watchFolders();

  return {
    hostUrl: `${hostOrigin}/`,
    appUrl: `${appOrigin}/`,
    hostPort,
    appPort,
    folder: () => folder,
    async close() {
      clearTimeout(settle);
      for (const watcher of watchers.values()) watcher.close();
      for (const stream of events) stream.end();
      events.clear();
      await Promise.all(
        [hostServer, appServer].map(
          (server) =>
            new Promise<void>((resolve) => {
              if (!server) return resolve();
              server.close(() => resolve());
              server.closeAllConnections();
            }),
        ),
      );
    },
  };
}

/** Why `path` is not served although the folder has it: it, or a folder above it, is left out. */
function leftOutReason(folder: AppFolderState, path: string): string | undefined {
  const parts = path.split('/');
  for (let depth = 1; depth <= parts.length; depth++) {
    const reason = folder.leftOut.get(parts.slice(0, depth).join('/'));
    if (reason !== undefined) return reason;
  }
  return undefined;
}

/** A path from a request as it may be shown: no control characters (a terminal would obey them). */
function printable(path: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is removed
  return path.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
}

/** Listens on 127.0.0.1 at `port`, or the first free port after it; the port taken. */
async function listenFrom(server: Server, port: number): Promise<number> {
  for (let tried = 0; tried < portTries; tried++) {
    const candidate = port + tried;
    if (candidate > 65535) break;
    const outcome = await new Promise<number | 'taken'>((resolve, reject) => {
      const onError = (error: NodeJS.ErrnoException) => {
        server.off('listening', onListening);
        if (error.code === 'EADDRINUSE') resolve('taken');
        else reject(new CliError(`cannot listen on 127.0.0.1:${candidate}: ${error.message}`));
      };
      const onListening = () => {
        server.off('error', onError);
        resolve((server.address() as AddressInfo).port);
      };
      server.once('error', onError);
      server.once('listening', onListening);
      server.listen(candidate, '127.0.0.1');
    });
    if (outcome !== 'taken') return outcome;
  }
  throw new CliError(`ports ${port} to ${port + portTries - 1} are all taken: give another with --port`);
}

class BodyError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

async function readJson(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBodyBytes) throw new BodyError(413, `a body is at most ${maxBodyBytes} bytes`);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new BodyError(400, 'the body is not JSON');
  }
}

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  response.end(JSON.stringify(body));
}

function refuseCrossOrigin(response: ServerResponse): void {
  sendJson(response, 403, { message: 'only the host page of this dev-server may ask that' });
}

async function sendAsset(response: ServerResponse, name: string): Promise<void> {
  const { path, bytes } = await devAsset(name);
  response.writeHead(200, {
    'content-type': contentTypes[extname(path)] ?? 'application/octet-stream',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    // The runtime is loaded by the app from its own origin; nothing needs it elsewhere.
  });
  response.end(bytes);
}
