/** A throwaway npm registry for tests: real tarballs made by `npm pack`, served from 127.0.0.1. */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

export interface NpmRegistryOptions {
  packageName: string;
  /** Each becomes a package whose `svc` bin prints the version. */
  versions: string[];
  distTags: Record<string, string>;
  /** Scratch folder for the package sources and tarballs. */
  workDir: string;
  /** The environment `npm pack` runs in (an isolated cache and HOME). */
  env: NodeJS.ProcessEnv;
}

export interface NpmRegistry {
  /** With a trailing slash, as npm writes registry URLs. */
  url: string;
  /** Every path asked for, in order; tests clear it between cases. */
  requests: string[];
  tarballRequests(): string[];
  /** Anything but 200 makes tarball downloads fail with that status, as a broken mirror would. */
  tarballStatus: number;
  close(): Promise<void>;
}

/**
 * The environment of a user whose npm knows nothing but this registry and these folders, so tests neither
 * read nor touch the real `~/.npmrc`, cache or global packages. Variables that an enclosing `npm test` sets
 * (npm_config_userconfig, npm_config_prefix…) would win over HOME and are dropped.
 */
export function isolatedNpmEnv(folders: { home: string; cache: string; prefix: string }, registry: string) {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!/^npm_/i.test(name)) env[name] = value;
  }
  return {
    ...env,
    HOME: folders.home,
    USERPROFILE: folders.home,
    npm_config_cache: folders.cache,
    npm_config_prefix: folders.prefix,
    npm_config_registry: registry,
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    npm_config_update_notifier: 'false',
    // An unreachable registry must fail in a test's time, not after npm's minutes of retries.
    npm_config_fetch_retries: '0',
    npm_config_fetch_timeout: '3000',
  };
}

interface Tarball {
  path: string;
  bytes: Buffer;
}

async function packVersion(
  options: NpmRegistryOptions,
  version: string,
): Promise<Tarball & { manifest: object }> {
  const source = join(options.workDir, 'src', version);
  await mkdir(join(source, 'bin'), { recursive: true });
  const manifest = { name: options.packageName, version, bin: { svc: 'bin/svc.js' } };
  await writeFile(join(source, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  await writeFile(
    join(source, 'bin', 'svc.js'),
    `#!/usr/bin/env node\nconsole.log(${JSON.stringify(version)});\n`,
    {
      mode: 0o755,
    },
  );
  const out = join(options.workDir, 'tarballs');
  await mkdir(out, { recursive: true });
  const { stdout } = await execFileAsync('npm', ['pack', '--json', '--pack-destination', out], {
    cwd: source,
    env: options.env,
  });
  const [packed] = JSON.parse(stdout) as { filename: string }[];
  if (!packed) throw new Error(`npm pack printed no tarball for ${version}: ${stdout}`);
  const bareName = options.packageName.split('/').at(-1) ?? options.packageName;
  return {
    path: `/${options.packageName}/-/${bareName}-${version}.tgz`,
    bytes: await readFile(join(out, packed.filename)),
    manifest,
  };
}

export async function startNpmRegistry(options: NpmRegistryOptions): Promise<NpmRegistry> {
  const packed = await Promise.all(options.versions.map((version) => packVersion(options, version)));
  const tarballs = new Map<string, Buffer>(packed.map((p) => [p.path, p.bytes]));
  const requests: string[] = [];
  let packument = '';

  const server = createServer((req, res) => {
    const path = req.url ?? '/';
    requests.push(path);
    const tarball = tarballs.get(path);
    if (tarball && registry.tarballStatus !== 200) {
      res.writeHead(registry.tarballStatus, { 'content-type': 'text/plain' });
      res.end('tarball unavailable');
      return;
    }
    if (tarball) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': tarball.length });
      res.end(tarball);
      return;
    }
    // npm asks for a scoped package with its slash encoded; either case of the escape is the same name.
    const encoded = options.packageName.replace('/', '%2f');
    if (req.method === 'GET' && (path === `/${encoded}` || path === `/${encoded.replace('%2f', '%2F')}`)) {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache' });
      res.end(packument);
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end('{"error":"not_found"}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;

  const now = new Date().toISOString();
  packument = JSON.stringify({
    _id: options.packageName,
    name: options.packageName,
    'dist-tags': options.distTags,
    versions: Object.fromEntries(
      options.versions.map((version, i) => {
        const { path, bytes, manifest } = packed[i] as (typeof packed)[number];
        const dist = {
          tarball: new URL(path.slice(1), url).href,
          integrity: `sha512-${createHash('sha512').update(bytes).digest('base64')}`,
          shasum: createHash('sha1').update(bytes).digest('hex'),
        };
        return [version, { ...manifest, _id: `${options.packageName}@${version}`, dist }];
      }),
    ),
    time: { created: now, modified: now, ...Object.fromEntries(options.versions.map((v) => [v, now])) },
  });

  const registry: NpmRegistry = {
    url,
    requests,
    tarballRequests: () => requests.filter((path) => tarballs.has(path)),
    tarballStatus: 200,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
  return registry;
}
