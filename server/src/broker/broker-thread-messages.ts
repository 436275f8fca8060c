/**
 * What the service's main thread and the embedded broker's thread (broker-thread.ts) say to each
 * other: the broker asks for credentials and reports refusals, drops, log lines and the cars signed
 * in; the main thread starts and stops it, answers, and tells it of credentials that changed.
 */
import type { ConnectionRefusal } from './broker-metrics.ts';
import type { QueueBound, QueueLimit } from './broker-sessions.ts';
import type { BrokerCredential } from './credentials.ts';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** What the broker's thread is started with (its `workerData`). */
export interface BrokerThreadSettings {
  host: string;
  port: number;
  queueBound: QueueBound;
  tls?: { port: number; cert: Uint8Array; key: Uint8Array };
  servicePassword: string;
}

export type ToBrokerThread =
  | { type: 'start' }
  | { type: 'stop' }
  /** A credential changed: forget it and disconnect its clients, then say `forgotten`. */
  | { type: 'forget'; id: number; username: string }
  | { type: 'credential'; id: number; credential: BrokerCredential | undefined }
  | { type: 'credential-failed'; id: number };

export type FromBrokerThread =
  | { type: 'started'; url: string; tlsUrl: string | undefined }
  | { type: 'start-failed'; message: string; code: string | undefined; listener: string | undefined }
  | { type: 'stopped' }
  | { type: 'forgotten'; id: number }
  | { type: 'read-credential'; id: number; username: string }
  | { type: 'refused'; reason: ConnectionRefusal }
  | { type: 'queue-dropped'; limit: QueueLimit }
  | { type: 'signed-in-cars'; cars: number }
  | { type: 'log'; level: LogLevel; message: string; fields: Record<string, unknown> | undefined };
