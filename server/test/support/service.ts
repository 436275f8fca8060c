/** A started service for one test file: port 0, responses checked against the contract, a movable clock. */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp } from '../../src/app.ts';
import { type Config, loadConfig } from '../../src/config.ts';
import type { Logger } from '../../src/logger.ts';
import { openTestStore, type TestStore } from './store.ts';

export class TestClock {
  now: number;
  constructor(start = Date.parse('2026-11-21T10:00:00Z')) {
    this.now = start;
  }
  readonly clock = () => new Date(this.now);
  advance(ms: number): void {
    this.now += ms;
  }
}

export interface TestService {
  url: string;
  config: Config;
  store: TestStore;
  clock: TestClock;
  logs: string[];
  app: ReturnType<typeof createApp>;
  stop(): Promise<void>;
}

export async function startTestService(
  env: Record<string, string> = {},
  options: { store?: TestStore; docsDir?: string } = {},
): Promise<TestService> {
  // Package files go to a data folder of the test's own; the store is given below.
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-test-data-'));
  const config: Config = { ...loadConfig({ PORT: '0', DATA_DIR: dataDir, ...env }), validateResponses: true };
  const store =
    options.store ??
    (await openTestStore({
      acquireTimeoutMs: config.databaseAcquireTimeoutMs,
      statementTimeoutMs: config.databaseStatementTimeoutMs,
    }));
  const clock = new TestClock();
  const logs: string[] = [];
  const logger: Logger = {
    info: (message, fields) => logs.push(JSON.stringify({ level: 'info', message, ...fields })),
    warn: (message, fields) => logs.push(JSON.stringify({ level: 'warn', message, ...fields })),
    error: (message, fields) =>
      logs.push(JSON.stringify({ level: 'error', message, ...fields, error: String(fields?.error) })),
  };
  const app = createApp(config, { db: store.db, clock: clock.clock, logger, docsDir: options.docsDir });
  const { url } = await app.start();
  return {
    url,
    config,
    store,
    clock,
    logs,
    app,
    async stop() {
      await app.stop();
      if (!options.store) await store.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
