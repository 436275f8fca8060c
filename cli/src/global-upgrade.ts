/**
 * `svc upgrade` without the command: find the newest release with the user's npm, and install it
 * over this copy when this copy is npm's global install; for any other copy, say the command.
 */
import { execFile } from 'node:child_process';
import { readFile, realpath } from 'node:fs/promises';
import { basename, dirname, join, posix, resolve, win32 } from 'node:path';
import { promisify } from 'node:util';
import { compareVersions, parseVersion } from '@svc/sdk';

const execFileAsync = promisify(execFile);

export interface UpgradeOptions {
  /** `@svc/cli` */
  packageName: string;
  /** This copy's version, e.g. `5.6.0`. */
  currentVersion: string;
  /** Where this copy of the CLI runs from (the bundle's file path): upgraded in place only inside npm's global packages. */
  installedAt: string;
  /** npm runs with it, so its config applies: npm_config_registry, npm_config_prefix, HOME/.npmrc. */
  env: NodeJS.ProcessEnv;
  /** `npm` (found on env.PATH) by default; an absolute path, or an npm-cli.js run with this node. */
  npmCommand?: string;
  /** Progress, meant for stderr. */
  log(message: string): void;
}

export type UpgradeResult =
  | { status: 'up-to-date'; version: string }
  | { status: 'upgraded'; from: string; to: string }
  | { status: 'manual'; from: string; to: string; command: string; reason: string };

/** A failure the user can act on: the message says what happened and what to run by hand. */
export class UpgradeError extends Error {
  /** The command that would finish the job by hand, when there is one. */
  readonly command: string | undefined;
  /** The end of npm's own error output, when npm failed. */
  readonly npmOutput: string | undefined;

  constructor(message: string, details: { command?: string; npmOutput?: string } = {}) {
    super(message);
    this.name = 'UpgradeError';
    this.command = details.command;
    this.npmOutput = details.npmOutput;
  }
}

export async function upgrade(options: UpgradeOptions): Promise<UpgradeResult> {
  const { packageName, currentVersion } = options;
  if (!parseVersion(currentVersion)) throw new Error(`not a semantic version: ${currentVersion}`);
  const npm = npmRunner(options);

  const registry = await registryFor(npm, packageName);
  options.log(`checking ${registry} for the newest ${packageName}`);
  const [newest, globalPrefix] = await Promise.all([
    latestVersion(npm, packageName, registry),
    npmValue(npm, ['prefix', '--global']),
  ]);
  // Never "upgrade" a pre-release or a newer build back down to what `latest` names.
  if (compareVersions(newest, currentVersion) <= 0) return { status: 'up-to-date', version: currentVersion };

  const spec = `${packageName}@${newest}`;
  const command = `npm install -g ${spec}`;
  const platform = process.platform;
  const installedAt = await realpathOfNearest(options.installedAt);
  const packageDir = globalPackageDir(await realpathOfNearest(globalPrefix), packageName, platform);
  if (!isGlobalInstall(installedAt, packageDir, platform)) {
    return {
      status: 'manual',
      from: currentVersion,
      to: newest,
      command,
      reason:
        `This copy runs from ${installedAt}, outside npm's global packages (${packageDir}), and only ` +
        'a global npm install is upgraded in place',
    };
  }

  options.log(`installing ${spec} with npm install -g (global prefix ${globalPrefix})`);
  try {
    await npm.run(['install', '--global', spec]);
  } catch (error) {
    const output = npmErrorOutput(error);
    const message = `\`${command}\` failed:\n${output}\nRun it yourself once the cause is fixed: ${command}`;
    throw new UpgradeError(message, { command, npmOutput: output });
  }

  const manifestPath = join(globalPackageDir(globalPrefix, packageName, platform), 'package.json');
  const installed = await readInstalledVersion(manifestPath);
  if (installed !== newest) {
    throw new UpgradeError(
      `npm reported success, but ${manifestPath} says ${installed ?? 'nothing'} instead of ${newest}. ` +
        `Run it yourself: ${command}`,
      { command },
    );
  }
  options.log(`${spec} installed in ${dirname(manifestPath)}`);
  return { status: 'upgraded', from: currentVersion, to: newest };
}

// ---- npm ----

interface NpmRunner {
  run(args: string[]): Promise<{ stdout: string; stderr: string }>;
}

function npmRunner(options: UpgradeOptions): NpmRunner {
  let file = options.npmCommand ?? 'npm';
  let leading: string[] = [];
  if (file.endsWith('.js')) {
    leading = [file];
    file = process.execPath;
  } else if (options.npmCommand === undefined && process.platform === 'win32') {
    // npm.cmd cannot be started without a shell (Node refuses .cmd files since 20.12.2); the npm that
    // ships beside node.exe can, and it reads the same npmrc files.
    leading = [join(dirname(process.execPath), 'node_modules', 'npm', 'bin', 'npm-cli.js')];
    file = process.execPath;
  }
  return {
    async run(args) {
      try {
        return await execFileAsync(file, [...leading, ...args], {
          env: options.env,
          maxBuffer: 64 * 1024 * 1024,
          windowsHide: true,
        });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
          throw new UpgradeError(
            `could not run npm (${file}): svc upgrade installs with npm, which is not on PATH`,
          );
        }
        throw error;
      }
    },
  };
}

/** What npm prints for a question about its own configuration; it fails only on a broken setup. */
async function npmValue(npm: NpmRunner, args: string[]): Promise<string> {
  try {
    return (await npm.run(args)).stdout.trim();
  } catch (error) {
    if (error instanceof UpgradeError) throw error;
    const output = npmErrorOutput(error);
    throw new UpgradeError(`\`npm ${args.join(' ')}\` failed:\n${output}`, { npmOutput: output });
  }
}

/** The registry npm uses for this package: the scope's own registry when `.npmrc` names one. */
async function registryFor(npm: NpmRunner, packageName: string): Promise<string> {
  const scope = packageName.startsWith('@') ? packageName.split('/')[0] : undefined;
  if (!scope) return npmValue(npm, ['config', 'get', 'registry']);
  // Asked for two keys, npm prints `key=value` lines; an unset key reads `undefined`.
  const stdout = await npmValue(npm, ['config', 'get', `${scope}:registry`, 'registry']);
  const values = new Map(
    stdout.split(/\r?\n/).flatMap((line) => {
      const at = line.indexOf('=');
      return at > 0 ? [[line.slice(0, at), line.slice(at + 1).trim()] as const] : [];
    }),
  );
  const scoped = values.get(`${scope}:registry`);
  return scoped && scoped !== 'undefined' ? scoped : (values.get('registry') ?? 'the npm registry');
}

/** Asked of npm itself so that `.npmrc`, scoped registries, proxies and auth apply exactly as for the user. */
async function latestVersion(npm: NpmRunner, packageName: string, registry: string): Promise<string> {
  let stdout: string;
  try {
    ({ stdout } = await npm.run(['view', `${packageName}@latest`, 'version', '--json']));
  } catch (error) {
    if (error instanceof UpgradeError) throw error;
    throw lookupError(error, packageName, registry);
  }
  let version: unknown;
  try {
    version = stdout.trim() ? JSON.parse(stdout) : undefined;
  } catch {
    version = undefined;
  }
  if (typeof version !== 'string' || !parseVersion(version)) {
    throw new UpgradeError(
      `${registry} names no usable latest version of ${packageName} (npm printed: ${stdout.trim()})`,
    );
  }
  return version;
}

function lookupError(error: unknown, packageName: string, registry: string): UpgradeError {
  // With --json, npm describes its failure as {"error": {"code", "summary"}} on stdout.
  let code = '';
  let summary = '';
  try {
    const parsed = JSON.parse((error as { stdout?: string }).stdout ?? '') as {
      error?: { code?: string; summary?: string };
    };
    code = parsed.error?.code ?? '';
    summary = parsed.error?.summary ?? '';
  } catch {
    summary = npmErrorOutput(error);
  }
  if (code === 'E404') {
    return new UpgradeError(
      `${registry} has no package ${packageName}: check which registry your npm uses (npm config get registry)`,
      { npmOutput: summary },
    );
  }
  if (code === 'E401' || code === 'E403' || code === 'ENEEDAUTH') {
    return new UpgradeError(
      `${registry} refused to show ${packageName} (${code}): sign in with npm login --registry ${registry}`,
      { npmOutput: summary },
    );
  }
  return new UpgradeError(
    `could not reach the npm registry ${registry} to look up ${packageName}: ${summary || code || 'npm failed'}`,
    { npmOutput: summary },
  );
}

/** The last lines of npm's stderr: where it says what went wrong and where its full log is. */
function npmErrorOutput(error: unknown): string {
  const { stderr, message } = error as { stderr?: string; message?: string };
  const lines = (stderr ?? '').split(/\r?\n/).filter((line) => line.trim() !== '');
  return lines.length > 0 ? lines.slice(-20).join('\n') : (message ?? String(error));
}

async function readInstalledVersion(manifestPath: string): Promise<string | undefined> {
  try {
    const manifest = JSON.parse(await readFile(manifestPath, 'utf8')) as { version?: unknown };
    return typeof manifest.version === 'string' ? manifest.version : undefined;
  } catch {
    return undefined;
  }
}

// ---- where this copy lives ----

/** Where `npm install -g` puts the package: `<prefix>/lib/node_modules/…`, `<prefix>\\node_modules\\…` on Windows. */
function globalPackageDir(prefix: string, packageName: string, platform: NodeJS.Platform): string {
  return platform === 'win32'
    ? win32.join(prefix, 'node_modules', ...packageName.split('/'))
    : posix.join(prefix, 'lib', 'node_modules', ...packageName.split('/'));
}

/**
 * Whether this copy is the one `npm install -g` replaces, from real paths (symlinks resolved: the
 * `bin/svc` link and the package it points into must agree). Any other copy (a project's, npx's,
 * another prefix's, Homebrew's, a checkout) would stay first on PATH or be overwritten by its own
 * manager, so it is not touched.
 */
export function isGlobalInstall(installedAt: string, packageDir: string, platform: NodeJS.Platform): boolean {
  const path = platform === 'win32' ? win32 : posix;
  const fold = (p: string) => (platform === 'win32' ? p.toLowerCase() : p);
  const relative = path.relative(fold(packageDir), fold(installedAt));
  return relative === '' || (relative.split(path.sep)[0] !== '..' && !path.isAbsolute(relative));
}

/** realpath of the path, or of its nearest existing ancestor with the rest appended (a prefix not made yet). */
async function realpathOfNearest(path: string): Promise<string> {
  const absolute = resolve(path);
  try {
    return await realpath(absolute);
  } catch {
    const parent = dirname(absolute);
    return parent === absolute ? absolute : join(await realpathOfNearest(parent), basename(absolute));
  }
}
