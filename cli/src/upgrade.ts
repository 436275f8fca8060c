/** `svc upgrade` without the command: find the newest release with the user's npm and install it as this copy was. */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
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
  /** Where this copy of the CLI runs from (the bundle's file path); decides how it was installed. */
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

  const platform = process.platform;
  const installation = classifyInstallation({
    installedAt: await realpathOfNearest(options.installedAt),
    globalPrefix: await realpathOfNearest(globalPrefix),
    packageName,
    platform,
    isProject: (dir) => existsSync(join(dir, 'package.json')),
  });
  if (installation.kind !== 'npm-global') {
    return {
      status: 'manual',
      from: currentVersion,
      to: newest,
      ...manualUpgrade(installation, packageName, newest),
    };
  }

  const spec = `${packageName}@${newest}`;
  const command = `npm install -g ${spec}`;
  options.log(`installing ${spec} with npm install -g (global prefix ${globalPrefix})`);
  try {
    await npm.run(['install', '--global', spec]);
  } catch (error) {
    const output = npmErrorOutput(error);
    const message = `\`${command}\` failed:\n${output}\nRun it yourself once the cause is fixed: ${command}`;
    throw new UpgradeError(message, { command, npmOutput: output });
  }

  const manifestPath = join(globalModules(globalPrefix, platform), ...packageName.split('/'), 'package.json');
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

export type Installation =
  | { kind: 'npm-global' }
  | { kind: 'other-prefix'; prefix: string }
  | { kind: 'npx'; cacheDir: string }
  | { kind: 'project'; projectDir: string }
  | { kind: 'homebrew' }
  | { kind: 'elsewhere'; path: string };

/** npm's global packages folder: `<prefix>/lib/node_modules`, but `<prefix>\node_modules` on Windows. */
function globalModules(prefix: string, platform: NodeJS.Platform): string {
  return platform === 'win32'
    ? win32.join(prefix, 'node_modules')
    : posix.join(prefix, 'lib', 'node_modules');
}

/**
 * How this copy was installed, from real paths (symlinks resolved: the `bin/svc` link and the package it
 * points into must agree). Only an install into the prefix the user's npm installs into now can be
 * upgraded in place; any other copy would stay first on PATH or be overwritten by its own manager.
 */
export function classifyInstallation(input: {
  installedAt: string;
  globalPrefix: string;
  packageName: string;
  platform: NodeJS.Platform;
  isProject(dir: string): boolean;
}): Installation {
  const path = input.platform === 'win32' ? win32 : posix;
  const packageDir = path.join(
    globalModules(input.globalPrefix, input.platform),
    ...input.packageName.split('/'),
  );
  if (isInside(path, input.installedAt, packageDir, input.platform)) return { kind: 'npm-global' };

  const parts = input.installedAt.split(/[\\/]/);
  const npx = parts.indexOf('_npx');
  if (npx >= 0 && parts.includes('node_modules', npx)) {
    return { kind: 'npx', cacheDir: parts.slice(0, npx + 2).join(path.sep) };
  }
  if (parts.includes('Cellar')) return { kind: 'homebrew' };

  const modules = parts.indexOf('node_modules');
  if (modules > 0) {
    const root = parts.slice(0, modules).join(path.sep) || path.sep;
    if (input.isProject(root)) return { kind: 'project', projectDir: root };
    // Not a project, so a node_modules of some other npm prefix (another Node version's, an old setting).
    const prefix =
      input.platform === 'win32' ? root : path.basename(root) === 'lib' ? path.dirname(root) : undefined;
    if (prefix !== undefined && !samePath(prefix, input.globalPrefix, input.platform)) {
      return { kind: 'other-prefix', prefix };
    }
  }
  return { kind: 'elsewhere', path: input.installedAt };
}

function manualUpgrade(
  installation: Exclude<Installation, { kind: 'npm-global' }>,
  packageName: string,
  version: string,
): { command: string; reason: string } {
  const spec = `${packageName}@${version}`;
  const global = `npm install -g ${spec}`;
  switch (installation.kind) {
    case 'project':
      return {
        command: `npm install ${spec}`,
        reason: `this copy belongs to the project in ${installation.projectDir}: run the command there`,
      };
    case 'npx':
      return {
        command: global,
        reason:
          `this copy runs from npx's cache (${installation.cacheDir}), which npx refills by itself: ` +
          `install it for good with the command, or run npx ${packageName}@latest`,
      };
    case 'other-prefix':
      return {
        command: global,
        reason:
          `this copy is installed under the npm prefix ${installation.prefix}, but your npm installs global ` +
          `packages elsewhere: after the command, remove the old copy (npm uninstall -g --prefix ` +
          `${installation.prefix} ${packageName}) so that the new one is found on PATH`,
      };
    case 'homebrew':
      return {
        command: global,
        reason:
          'this copy was installed by Homebrew: upgrade it with brew, or brew uninstall it and run the command',
      };
    case 'elsewhere':
      return {
        command: global,
        reason:
          `this copy runs from ${installation.path}, outside npm's global packages, so it cannot be replaced ` +
          'in place (a source checkout updates with git): the command installs the release with npm',
      };
  }
}

function samePath(a: string, b: string, platform: NodeJS.Platform): boolean {
  const path = platform === 'win32' ? win32 : posix;
  const normal = (p: string) => path.resolve(p).replace(/[\\/]+$/, '');
  return platform === 'win32' ? normal(a).toLowerCase() === normal(b).toLowerCase() : normal(a) === normal(b);
}

function isInside(path: typeof posix, child: string, parent: string, platform: NodeJS.Platform): boolean {
  const fold = (p: string) => (platform === 'win32' ? p.toLowerCase() : p);
  const relative = path.relative(fold(parent), fold(child));
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
