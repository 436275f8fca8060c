/**
 * A Postgres cluster of a test's own, made with initdb and started and stopped with pg_ctl, for
 * outages the machine's Postgres must not have (a server shutting down, a server gone). Where the
 * server's programs are missing the tests skip, saying so; CI installs them (.ci/run) and sets
 * SVC_REQUIRE_PG_CTL=1 so that a missing one fails there instead.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

/** The folder of initdb, pg_ctl and postgres: Debian's newest /usr/lib/postgresql/<n>/bin, else PATH's. */
function serverBinDir(): string | undefined {
  const debian = '/usr/lib/postgresql';
  if (existsSync(debian)) {
    const versions = readdirSync(debian)
      .filter((version) => existsSync(join(debian, version, 'bin', 'pg_ctl')))
      .sort((a, b) => Number(b) - Number(a));
    if (versions[0]) return join(debian, versions[0], 'bin');
  }
  const found = spawnSync('sh', ['-c', 'command -v pg_ctl'], { encoding: 'utf8' }).stdout.trim();
  return found ? join(found, '..') : undefined;
}

/** Why a cluster of the test's own cannot be made here, or undefined when it can. */
export function postgresClusterMissing(): string | undefined {
  const bin = serverBinDir();
  if (bin && existsSync(join(bin, 'initdb'))) return undefined;
  const reason =
    'no initdb/pg_ctl under /usr/lib/postgresql/*/bin or on PATH: install the Postgres server (apt-get install postgresql)';
  if (process.env.SVC_REQUIRE_PG_CTL === '1') throw new Error(`SVC_REQUIRE_PG_CTL=1, but there is ${reason}`);
  return reason;
}

export interface PostgresCluster {
  /** postgres://postgres@127.0.0.1:<port>/postgres */
  url: string;
  /** `pg_ctl stop -m smart` without waiting: new sessions are refused while the open ones go on. */
  beginSmartShutdown(): void;
  /** Whether the server process has stopped. */
  stopped(): boolean;
  start(): void;
  /** Stops the server (if it runs) and deletes its files. */
  remove(): void;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export async function startPostgresCluster(): Promise<PostgresCluster> {
  const bin = serverBinDir();
  if (!bin) throw new Error('no pg_ctl: see postgresClusterMissing()');
  const dir = mkdtempSync(join(tmpdir(), 'svc-test-pg-'));
  const data = join(dir, 'data');
  // initdb and postgres refuse to run as root: as root, the cluster runs as the postgres user.
  const asRoot = userInfo().uid === 0;
  if (asRoot) {
    const owner = execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim();
    const group = execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim();
    chownSync(dir, Number(owner), Number(group));
  }
  const run = (program: string, args: string[]) => {
    const command = asRoot ? 'runuser' : join(bin, program);
    const argv = asRoot ? ['-u', 'postgres', '--', join(bin, program), ...args] : args;
    execFileSync(command, argv, { stdio: ['ignore', 'ignore', 'pipe'], cwd: dir });
  };
  const port = await freePort();
  run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8']);
  const options = `-c listen_addresses=127.0.0.1 -p ${port} -k ${dir} -c fsync=off`;
  const start = () => run('pg_ctl', ['-D', data, '-o', options, '-l', join(dir, 'log'), '-w', 'start']);
  start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    beginSmartShutdown: () => run('pg_ctl', ['-D', data, '-m', 'smart', '-W', 'stop']),
    stopped: () => !existsSync(join(data, 'postmaster.pid')),
    start,
    remove() {
      if (existsSync(join(data, 'postmaster.pid'))) {
        try {
          run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
        } catch {
          // Stopped meanwhile.
        }
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
