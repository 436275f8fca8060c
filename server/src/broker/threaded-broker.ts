/**
 * The embedded broker on a thread of its own (broker-thread.ts; ADR 0054): the main thread keeps
 * the store, the metrics and the log, and answers the broker's questions; a credential made,
 * rotated or revoked is forgotten by the broker, and its clients disconnected, before `put` or
 * `remove` resolves, as with the broker in this thread.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import type { Logger } from '../logger.ts';
import type { ServiceBroker } from './broker.ts';
import type { BrokerMetrics } from './broker-metrics.ts';
import type { QueueBound } from './broker-sessions.ts';
import type { BrokerThreadSettings, FromBrokerThread, ToBrokerThread } from './broker-thread-messages.ts';
import type { CredentialStore } from './credentials.ts';
import { serviceUsername } from './embedded-broker.ts';

/**
 * The thread's module: the bundle's `broker-thread.js` beside this one in server/dist; in
 * development and tests, broker-thread.ts, loaded through tsx (a worker does not run the `--import`
 * of its execArgv, so tsx is registered by a line of code first) with the workspaces' sources.
 */
function threadEntry(): { entry: string | URL; eval: boolean; execArgv: string[] | undefined } {
  if (!import.meta.url.endsWith('.ts')) {
    return { entry: new URL('./broker-thread.js', import.meta.url), eval: false, execArgv: undefined };
  }
  const tsx = JSON.stringify(import.meta.resolve('tsx/esm/api'));
  const source = JSON.stringify(new URL('./broker-thread.ts', import.meta.url).href);
  return {
    entry: `import(${tsx}).then(({ register }) => { register(); return import(${source}); });`,
    eval: true,
    execArgv: ['--conditions=svc-source'],
  };
}

export function createThreadedBroker(deps: {
  credentials: CredentialStore;
  host: string;
  port: number;
  logger: Logger;
  metrics: BrokerMetrics;
  queueBound: QueueBound;
  tls?: { port: number; cert: Buffer; key: Buffer };
}): ServiceBroker {
  const { credentials, logger, metrics } = deps;
  const serviceCredential = { username: serviceUsername, password: randomBytes(24).toString('base64url') };
  let worker: Worker | undefined;
  let tlsUrl: string | undefined;
  let signedInCars = 0;
  let lastForget = 0;
  const forgetting = new Map<number, () => void>();

  const tell = (message: ToBrokerThread) => worker?.postMessage(message);

  function heard(message: FromBrokerThread): void {
    switch (message.type) {
      case 'read-credential':
        credentials.get(message.username).then(
          (credential) => tell({ type: 'credential', id: message.id, credential }),
          (error: unknown) => {
            logger.warn('broker sign-in failed: the credential store does not answer', { error });
            tell({ type: 'credential-failed', id: message.id });
          },
        );
        break;
      case 'forgotten':
        forgetting.get(message.id)?.();
        forgetting.delete(message.id);
        break;
      case 'refused':
        metrics.refused(message.reason);
        break;
      case 'queue-dropped':
        metrics.queueDropped(message.limit);
        break;
      case 'signed-in-cars':
        signedInCars = message.cars;
        break;
      case 'log':
        logger[message.level](message.message, message.fields);
        break;
    }
  }

  /** The broker forgets what it knew of `username` and drops its clients; resolves once it has. */
  async function forget(username: string): Promise<void> {
    if (!worker) return;
    const id = ++lastForget;
    const forgotten = new Promise<void>((resolve) => forgetting.set(id, resolve));
    tell({ type: 'forget', id, username });
    await forgotten;
  }

  /** The next message of one of these types, or the thread's failure. */
  async function reply<T extends FromBrokerThread['type']>(
    running: Worker,
    ...types: T[]
  ): Promise<Extract<FromBrokerThread, { type: T }>> {
    return new Promise((resolve, reject) => {
      const listen = (message: FromBrokerThread) => {
        if (!(types as string[]).includes(message.type)) return;
        running.off('message', listen);
        running.off('error', reject);
        resolve(message as Extract<FromBrokerThread, { type: T }>);
      };
      running.on('message', listen);
      running.once('error', reject);
    });
  }

  return {
    serviceCredential,
    accounts: {
      put: (account) => forget(account.username),
      remove: (username) => forget(username),
      // It keeps no accounts: every sign-in reads the key-value store.
      async list() {
        return undefined;
      },
    },
    async start() {
      const thread = threadEntry();
      const settings: BrokerThreadSettings = {
        host: deps.host,
        port: deps.port,
        queueBound: deps.queueBound,
        tls: deps.tls,
        servicePassword: serviceCredential.password,
      };
      const running = new Worker(thread.entry, {
        eval: thread.eval,
        workerData: settings,
        ...(thread.execArgv ? { execArgv: thread.execArgv } : {}),
      });
      worker = running;
      running.on('message', heard);
      running.on('error', (error) => logger.error('the embedded broker thread failed', { error }));
      running.postMessage({ type: 'start' } satisfies ToBrokerThread);
      const started = await reply(running, 'started', 'start-failed');
      if (started.type === 'start-failed') {
        worker = undefined;
        await running.terminate();
        throw Object.assign(new Error(started.message), { code: started.code, listener: started.listener });
      }
      tlsUrl = started.tlsUrl;
      return started.url;
    },
    get tlsUrl() {
      return tlsUrl;
    },
    signedInCars() {
      return signedInCars;
    },
    async stop() {
      const running = worker;
      if (!running) return;
      tlsUrl = undefined;
      const stopped = reply(running, 'stopped');
      running.postMessage({ type: 'stop' } satisfies ToBrokerThread);
      await stopped.catch(() => {});
      worker = undefined;
      signedInCars = 0;
      for (const resolve of forgetting.values()) resolve();
      forgetting.clear();
      await Promise.race([once(running, 'exit'), running.terminate()]);
    },
  };
}
