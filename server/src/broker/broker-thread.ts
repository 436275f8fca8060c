/**
 * The embedded broker's own thread (a worker started by threaded-broker.ts): aedes, its sign-in
 * and its ACL table run here, so that routing the fleet's messages never waits on the main
 * thread's store and requests, nor they on it. What only the main thread has, it asks for by
 * message: credentials (the store), metrics and the log.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { silentLogger } from '../logger.ts';
import type {
  BrokerThreadSettings,
  FromBrokerThread,
  LogLevel,
  ToBrokerThread,
} from './broker-thread-messages.ts';
import type { BrokerCredential, CredentialStore } from './credentials.ts';
import { createEmbeddedBroker } from './embedded-broker.ts';

const port = parentPort;
if (!port) throw new Error('broker-thread.ts runs as a worker thread, started by threaded-broker.ts');
const settings = workerData as BrokerThreadSettings;
const tell = (message: FromBrokerThread) => port.postMessage(message);

const credentialReads = new Map<
  number,
  { resolve(credential: BrokerCredential | undefined): void; reject(error: Error): void }
>();
let lastRead = 0;

/** The store, as far as the broker reads it: one question to the main thread per read. */
const credentials: CredentialStore = {
  get(username) {
    const id = ++lastRead;
    return new Promise((resolve, reject) => {
      credentialReads.set(id, { resolve, reject });
      tell({ type: 'read-credential', id, username });
    });
  },
  put: () => Promise.reject(new Error('the broker thread does not write credentials')),
  delete: () => Promise.reject(new Error('the broker thread does not write credentials')),
  usernames: () => Promise.reject(new Error('the broker thread does not list credentials')),
  async close() {},
};

function log(level: LogLevel) {
  return (message: string, fields?: Record<string, unknown>) => {
    try {
      tell({ type: 'log', level, message, fields });
    } catch {
      // A field the structured clone cannot copy (a function, a socket): the line still goes.
      tell({ type: 'log', level, message, fields: fields && { detail: String(JSON.stringify(fields)) } });
    }
  };
}

const broker = createEmbeddedBroker({
  credentials,
  host: settings.host,
  port: settings.port,
  logger: {
    debug: log('debug'),
    info: log('info'),
    warn: log('warn'),
    error: log('error'),
    pino: silentLogger.pino,
  },
  metrics: {
    refused: (reason) => tell({ type: 'refused', reason }),
    queueDropped: (limit) => tell({ type: 'queue-dropped', limit }),
  },
  queueBound: settings.queueBound,
  tls: settings.tls && {
    port: settings.tls.port,
    cert: Buffer.from(settings.tls.cert),
    key: Buffer.from(settings.tls.key),
  },
  servicePassword: settings.servicePassword,
  signedInCarsChanged: (cars) => tell({ type: 'signed-in-cars', cars }),
});

port.on('message', (message: ToBrokerThread) => {
  switch (message.type) {
    case 'start':
      broker.start().then(
        (url) => tell({ type: 'started', url, tlsUrl: broker.tlsUrl }),
        (error: NodeJS.ErrnoException & { listener?: string }) =>
          tell({ type: 'start-failed', message: error.message, code: error.code, listener: error.listener }),
      );
      break;
    case 'stop':
      broker.stop().then(() => {
        tell({ type: 'stopped' });
        port.close();
      });
      break;
    case 'forget':
      broker.accounts.remove(message.username).then(() => tell({ type: 'forgotten', id: message.id }));
      break;
    case 'credential':
    case 'credential-failed': {
      const read = credentialReads.get(message.id);
      credentialReads.delete(message.id);
      if (message.type === 'credential') read?.resolve(message.credential);
      else read?.reject(new Error('the credential store does not answer'));
      break;
    }
  }
});
