/**
 * A Mosquitto of the test's own: dynamic security initialised in a temporary folder with an admin,
 * a generated config on a free port of 127.0.0.1, started and waited for, killed after. It can be
 * killed and started again on the same port with the same dynamic-security file (a crash and a
 * restart). By default it keeps nothing else (`persistence false`), as a broker that lost its state;
 * with `persistence: true` it keeps sessions, their queued messages and retained messages in a file
 * (docs/operating.md, "Replicas and broker restarts") and restarts with them.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect as tcpConnect } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { serviceRoleAcls } from '../../src/broker/mosquitto-dynsec.ts';
import { maxPacketBytes } from '../../src/broker/packet-size-guard.ts';

const mosquittoBin = '/usr/sbin/mosquitto';
const dynsecPlugin = '/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so';

export interface TestMosquitto {
  url: string;
  /** Made by `dynsec init`: the admin role, plus the service's row of the ACL table (see below). */
  admin: { username: string; password: string };
  /** The dynamic-security file it reads, and writes on every change. */
  dynsecFile: string;
  /** Kills the broker at once (SIGKILL): no will is sent, every connection is cut. */
  kill(): Promise<void>;
  /** Starts it again, on the same port with the same dynamic-security file. */
  start(): Promise<void>;
  /**
   * Stops it as an operator's restart does (SIGTERM: with persistence it writes its state) and
   * starts it again.
   */
  restart(): Promise<void>;
  stop(): Promise<void>;
  /** The running broker's process id (undefined while it is down), e.g. to read its memory. */
  pid(): number | undefined;
}

/** A port of 127.0.0.1 free just now (a test gives it to a server that must keep it across restarts). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== 'object' || !address) throw new Error('no free port');
  return address.port;
}

/** Resolves once the port takes connections; rejects if Mosquitto exits first. */
export async function accepting(port: number, child: ChildProcess, output: () => string): Promise<void> {
  for (;;) {
    if (child.exitCode !== null) throw new Error(`mosquitto exited with ${child.exitCode}:\n${output()}`);
    const open = await new Promise<boolean>((resolve) => {
      const socket = tcpConnect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * docs/operating.md, "The broker", step 5: what Mosquitto may queue for one client that falls behind (the
 * bridge, in a burst) before it drops QoS 1 messages: 100,000 messages, bounded to 256 MiB.
 */
export const queuedForService = { messages: 100_000, bytes: 256 * 1024 * 1024 };

export async function startMosquitto(
  options: {
    persistence?: boolean;
    /** Give the admin account the service's row (the `svc-bridge` role of docs/operating.md); default true. */
    serviceRole?: boolean;
    /**
     * Start from a copy of this dynamic-security file (one a broker of this kind wrote, with the
     * service's role) whose admin is `admin`, rather than a new one: a fleet provisioned before.
     */
    dynsec?: { file: string; admin: { username: string; password: string } };
    /** More lines for mosquitto.conf (a benchmark's bounds). */
    settings?: string[];
  } = {},
): Promise<TestMosquitto> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-mosquitto-'));
  const admin = options.dynsec?.admin ?? {
    username: 'svc-admin',
    password: randomBytes(18).toString('hex'),
  };
  const dynsecFile = join(dir, 'dynsec.json');
  if (options.dynsec) {
    copyFileSync(options.dynsec.file, dynsecFile);
  } else {
    execFileSync('mosquitto_ctrl', ['dynsec', 'init', dynsecFile, admin.username, admin.password], {
      stdio: 'ignore',
    });
    if (options.serviceRole !== false) grantServiceRole(dynsecFile, admin.username);
  }
  const port = await freePort();
  const configFile = join(dir, 'mosquitto.conf');
  writeFileSync(
    configFile,
    [
      `listener ${port} 127.0.0.1`,
      'allow_anonymous false',
      ...(options.persistence
        ? ['persistence true', `persistence_location ${dir}/`, 'persistence_file mosquitto.db']
        : ['persistence false']),
      // What docs/operating.md, "The broker", asks operators for: the packets cars need, and no more.
      `max_packet_size ${maxPacketBytes}`,
      // Also from docs/operating.md, "The broker": room for the bridge to fall behind in a burst without
      // Mosquitto dropping the QoS 1 messages queued for it (its default keeps 1,000).
      `max_queued_messages ${queuedForService.messages}`,
      `max_queued_bytes ${queuedForService.bytes}`,
      // Run as root, Mosquitto would become the user `mosquitto`, who may not read this folder.
      `user ${userInfo().username}`,
      `plugin ${dynsecPlugin}`,
      `plugin_opt_config_file ${dynsecFile}`,
      ...(options.settings ?? []),
      'log_dest stderr',
      'log_type error',
      'log_type warning',
      '',
    ].join('\n'),
  );
  let child: ChildProcess | undefined;
  let output = '';
  const launch = async () => {
    output = '';
    const started = spawn(mosquittoBin, ['-c', configFile], { stdio: ['ignore', 'ignore', 'pipe'] });
    child = started;
    started.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    await accepting(port, started, () => output);
  };
  const end = async (signal: NodeJS.Signals) => {
    const running = child;
    if (running && running.exitCode === null && running.signalCode === null) {
      const exited = new Promise((resolve) => running.once('exit', resolve));
      running.kill(signal);
      await exited;
    }
  };
  const url = `mqtt://127.0.0.1:${port}`;
  const stop = async () => {
    await end('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await launch();
  } catch (error) {
    await stop();
    throw error;
  }
  const restart = async () => {
    await end('SIGTERM');
    await launch();
  };
  const pid = () => (child?.exitCode === null && child.signalCode === null ? child.pid : undefined);
  return { url, admin, dynsecFile, stop, kill: () => end('SIGKILL'), start: launch, restart, pid };
}

/**
 * What an operator does once: a role with the service's row, given to the service's account. Done
 * in the file before Mosquitto reads it, since changing a connected client's roles disconnects it.
 */
export function grantServiceRole(dynsecFile: string, username: string): void {
  const config = JSON.parse(readFileSync(dynsecFile, 'utf8')) as {
    clients: { username: string; roles: { rolename: string }[] }[];
    roles: { rolename: string; acls: typeof serviceRoleAcls }[];
  };
  config.roles.push({ rolename: 'svc-bridge', acls: serviceRoleAcls });
  for (const client of config.clients) {
    if (client.username === username) client.roles.push({ rolename: 'svc-bridge' });
  }
  writeFileSync(dynsecFile, JSON.stringify(config, null, 2));
}
