/** A started service for one test file: port 0, responses checked against the contract, a movable clock. */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AdminCode } from '../../src/accounts/admin-codes.ts';
import { createPasswords, passwordCost } from '../../src/accounts/passwords.ts';
import { type AppDependencies, createApp } from '../../src/app.ts';
import { type Config, loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/logger.ts';
import { testKeyEncryptionKey } from './key-encryption.ts';
import { openTestStore, type TestStore } from './store.ts';

/**
 * scrypt at 1/32 of the service's cost: every test signs accounts up, and at full cost they spent
 * seconds a file hashing. Stored hashes name their cost, so nothing else changes.
 */
const cheapPasswords = createPasswords({ ...passwordCost, N: 2 ** 10 });

export class TestClock {
  private base: number;
  private readonly runs: boolean;
  /** Where real time stood at the start, for a clock that runs. */
  private readonly realStart = Date.now();
  /** A clock stands still unless moved; one that `runs` also follows real time (leases, renewals). */
  constructor(start = Date.parse('2026-11-21T10:00:00Z'), runs = false) {
    this.base = start;
    this.runs = runs;
  }
  get now(): number {
    return this.base + (this.runs ? Date.now() - this.realStart : 0);
  }
  readonly clock = () => new Date(this.now);
  advance(ms: number): void {
    this.base += ms;
  }
}

export interface TestService {
  url: string;
  /** Where this service serves its Prometheus metrics (a port of its own). */
  metricsUrl: string;
  /** Where cars connect: this service's embedded broker on a free port, or its MQTT_URL. */
  mqttUrl: string;
  /** This service's embedded broker's TLS listener on a free port, when MQTT_TLS_CERT is given. */
  mqttTlsUrl: string | undefined;
  config: Config;
  store: TestStore;
  clock: TestClock;
  logs: string[];
  /** What `npm start` would print for the operator: one code per unclaimed admin email. */
  adminCodes: AdminCode[];
  app: ReturnType<typeof createApp>;
  stop(): Promise<void>;
}

export async function startTestService(
  env: Record<string, string> = {},
  options: {
    store?: TestStore;
    docsDir?: string;
    /** The built web console served at /console; by default console/dist. */
    consoleDir?: string;
    /** The runtime's browser build served at /_svc/sdk.js; by default the one `npm run build` makes. */
    sdkScript?: string;
    clockRuns?: boolean;
    /** A data folder the caller owns (replicas sharing one); by default one of the test's own. */
    dataDir?: string;
    /** The broker the MQTT bridge signs in to, and how it batches telemetry. */
    bridge?: Pick<AppDependencies, 'brokerConnection' | 'telemetryBatch'>;
    /** How often the signing keys' schedule is looked at, in milliseconds; by default a minute. */
    signingKeyCheckMs?: number;
  } = {},
): Promise<TestService> {
  // Package files go to a data folder of the test's own; the store is given below.
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'svc-test-data-'));
  const config: Config = {
    ...loadConfig({
      PORT: '0',
      METRICS_PORT: '0',
      MQTT_PORT: '0',
      DATA_DIR: dataDir,
      SVC_KEY_ENCRYPTION_KEY: testKeyEncryptionKey,
      MQTT_TLS_PORT: '0',
      ...env,
    }),
    validateResponses: true,
  };
  const store =
    options.store ??
    (await openTestStore({
      acquireTimeoutMs: config.databaseAcquireTimeoutMs,
      statementTimeoutMs: config.databaseStatementTimeoutMs,
    }));
  // Replicas with running clocks must agree on the time: theirs is the real one.
  const clock = options.clockRuns ? new TestClock(Date.now(), true) : new TestClock();
  const logs: string[] = [];
  // The service's own logger, writing its lines here instead of to stderr.
  const logger = createLogger({
    destination: { write: (line) => logs.push(line.trimEnd()) },
    level: config.logLevel,
  });
  const app = createApp(config, {
    db: store.db,
    clock: clock.clock,
    logger,
    docsDir: options.docsDir,
    consoleDir: options.consoleDir,
    sdkScript: options.sdkScript,
    passwords: cheapPasswords,
    signingKeyCheckMs: options.signingKeyCheckMs,
    ...options.bridge,
  });
  const { url, metricsUrl, mqttUrl, mqttTlsUrl, adminCodes } = await app.start();
  return {
    url,
    metricsUrl,
    mqttUrl,
    mqttTlsUrl,
    config,
    store,
    clock,
    logs,
    adminCodes,
    app,
    async stop() {
      await app.stop();
      if (!options.store) await store.close();
      if (!options.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
