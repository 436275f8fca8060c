/** `svc dev`: checks what it was given, starts the dev-server, says where, and runs until Ctrl-C. */
import { spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { SvcContext } from '../context.ts';
import { CliError, ExitCode } from '../errors.ts';
import { cliVersion } from '../version.ts';
import { loadDevSigningKey } from './dev-key.ts';
import { startDevServer } from './dev-server.ts';
import { allowedOriginFault } from './network-rules.ts';
import {
  CarChangeError,
  checkDeviceId,
  checkLocale,
  defaultDeviceId,
  defaultLocale,
} from './simulated-car.ts';

export interface DevCommandOptions {
  dir: string;
  port: number;
  car: string | undefined;
  locale: string | undefined;
  open: boolean;
  allowOrigins: string[];
}

export async function runDevServer(context: SvcContext, options: DevCommandOptions): Promise<number> {
  const { stdout, stderr } = context;
  const log = (line: string) => stderr.write(`svc dev: ${line}\n`);
  let deviceId: string;
  let locale: string;
  try {
    deviceId = checkDeviceId(options.car ?? defaultDeviceId);
    locale = checkLocale(options.locale ?? defaultLocale);
  } catch (error) {
    if (!(error instanceof CarChangeError)) throw error;
    const option = error.field === 'deviceId' ? '--car' : '--locale';
    throw new CliError(`${option}: ${error.message}`, ExitCode.usage);
  }
  for (const origin of options.allowOrigins) {
    const fault = allowedOriginFault(origin);
    if (fault) throw new CliError(`--allow-origin: ${fault}`, ExitCode.usage);
  }
  const dir = resolve(options.dir);
  if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory()) {
    throw new CliError(
      `no folder at ${options.dir}: give the folder of the mini-app (the one with manifest.json)`,
    );
  }
  // A folder with a broken manifest is served (its problems shown until fixed); one with none at
  // all is most likely not the app's.
  if (!existsSync(join(dir, 'manifest.json'))) {
    throw new CliError(
      `no manifest.json in ${options.dir}: give the folder of the mini-app (to try the example: svc dev examples/hello-car)`,
    );
  }
  const { key, replaced, warning } = loadDevSigningKey(context.home);
  if (replaced) log(replaced);
  if (warning) log(warning);

  const server = await startDevServer({
    dir,
    port: options.port,
    deviceId,
    locale,
    allowedOrigins: options.allowOrigins,
    key,
    hostVersion: `svc-dev/${cliVersion}`,
    log,
  });
  const { manifest, files } = server.folder();
  const what = manifest ? `${manifest.id} ${manifest.version}` : 'an app whose manifest has problems';
  const network = [...(manifest?.network ?? []), ...options.allowOrigins];
  stdout.write(
    `Serving ${what} from ${options.dir} (${files.size} file${files.size === 1 ? '' : 's'}, as svc publish would pack them)\n` +
      (server.hostPort === options.port ? '' : `  port ${options.port} was taken\n`) +
      `  host page:  ${server.hostUrl}  (open this)\n` +
      `  app origin: ${server.appUrl}  (connects to 'self'${network.length > 0 ? `, ${network.join(', ')}` : ' only'})\n` +
      (server.appPort === server.hostPort + 1 ? '' : `  port ${server.hostPort + 1} was taken too\n`) +
      `  car:        ${deviceId}, locale ${locale}\n` +
      `  tokens:     signed by this machine's dev key; JWKS at ${new URL('/.well-known/jwks.json', server.hostUrl).href}\n` +
      (options.allowOrigins.length > 0
        ? `  allowed for this session only: ${options.allowOrigins.join(', ')} (svc publish still requires https:// origins in manifest.json)\n`
        : '') +
      'Reloads on save. Ctrl-C stops.\n',
  );
  if (options.open) openBrowser(server.hostUrl, log);

  await new Promise<void>((stop) => {
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await server.close();
  stdout.write('Stopped.\n');
  return ExitCode.success;
}

/** Best effort: the URL is printed either way. */
function openBrowser(url: string, log: (line: string) => void): void {
  const [command, ...args] =
    process.platform === 'darwin'
      ? ['open', url]
      : process.platform === 'win32'
        ? ['cmd', '/c', 'start', '""', url]
        : ['xdg-open', url];
  const child = spawn(command as string, args, { stdio: 'ignore', detached: true });
  child.on('error', () => log(`could not open a browser (${command}): open ${url} yourself`));
  child.unref();
}
