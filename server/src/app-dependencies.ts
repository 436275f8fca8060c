/** What `createApp` (app.ts) takes besides its config, and what its start and stop give back. */
import type { AdminCode } from './accounts/admin-codes.ts';
import type { Passwords } from './accounts/passwords.ts';
import type { TelemetryBatchOptions } from './cars/telemetry-batch.ts';
import type { Clock } from './clock.ts';
import type { Logger } from './logger.ts';
import type { BrokerConnection } from './mqtt/bridge.ts';
import type { Db } from './store/db.ts';
import type { KeyRing } from './store/key-encryption.ts';

export interface AppDependencies {
  /** An open store; by default one is opened from the config (and closed by `stop`). */
  db?: Db;
  clock?: Clock;
  logger?: Logger;
  /** Folder with the built reference page (`npm run build`); /docs says how to build it when absent. */
  docsDir?: string;
  /** The browser build of the runtime served at /_svc/sdk.js; by default client/dist/runtime.browser.js. */
  sdkScript?: string;
  /** The built web console served at /console; by default console/dist (`npm run build`). */
  consoleDir?: string;
  /** Password hashing at another scrypt cost (tests); by default the service's own. */
  passwords?: Passwords;
  /**
   * The broker the MQTT bridge signs in to, with the service's own credential. Without it no
   * bridge runs: nothing cars publish is stored.
   */
  brokerConnection?: BrokerConnection;
  /** How the bridge batches telemetry (tests); by default its own. */
  telemetryBatch?: TelemetryBatchOptions;
  /** How often the signing keys' schedule is looked at, in milliseconds (tests); by default a minute. */
  signingKeyCheckMs?: number;
  /** The key-encryption keys; by default from the config (`loadKeyRing`). */
  keyRing?: KeyRing;
}

export interface RunningApp {
  url: string;
  /** Where Prometheus reads the metrics. */
  metricsUrl: string;
  /** Where cars connect: the embedded broker (its real port when MQTT_PORT is 0), or MQTT_URL. */
  mqttUrl: string;
  /** The embedded broker's TLS listener (its real port when MQTT_TLS_PORT is 0), when it has one. */
  mqttTlsUrl: string | undefined;
  /** One-time codes for the listed admin emails not yet claimed: for the operator's eyes only. */
  adminCodes: AdminCode[];
}

export interface StoppedApp {
  /** Requests still running at the end of the shutdown grace, and cut. */
  cut: number;
}
