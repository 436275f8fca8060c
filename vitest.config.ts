/**
 * `npm test`: every `test/**\/*.test.ts` of the workspaces and scripts/. `npm test -- device-id`
 * runs the files whose path contains `device-id`.
 */
import { availableParallelism } from 'node:os';
import { defaultClientConditions, defaultServerConditions } from 'vite';
import { defineConfig } from 'vitest/config';
import { sourceCondition } from './scripts/build-sdk.ts';

export default defineConfig({
  // Workspaces import @svc/sdk as its TypeScript source, never a dist/ built earlier.
  resolve: { conditions: [sourceCondition, ...defaultClientConditions] },
  // Without `module`, which Node never reads: the AWS SDK's `module` builds import files without
  // their extension, loadable by bundlers only.
  ssr: {
    resolve: {
      conditions: [sourceCondition, ...defaultServerConditions.filter((condition) => condition !== 'module')],
    },
  },
  test: {
    include: ['{scripts,client,ssh,manifest,server,cli,console,simulator}/test/**/*.test.ts'],
    exclude: ['**/node_modules/**', '**/fixtures/**'],
    // The SDK package and the CLI bundle the end-to-end tests run, built once for all of them.
    // And one migrated database, which every test file's store starts from.
    globalSetup: ['scripts/test/build-cli.global.ts', 'scripts/test/store-template.global.ts'],
    // Each file in a process of its own: tests start services, agents and keyrings, and some
    // set process-wide state (the environment, signal handlers).
    pool: 'forks',
    // As many files at once as cores (vitest's default is one less): the suites spend much of
    // their time waiting on the processes and stores they start. More than that starves the
    // tests that time a slow or cut request.
    maxWorkers: Math.max(2, availableParallelism()),
    // Suites start real processes, ssh-keygen, brokers and Postgres databases: their time goes to
    // waiting, not to this machine's cores, so a budget per test guards only against a hang.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    teardownTimeout: 30_000,
    server: {
      deps: {
        // clipanion's ES build imports a folder (`../platform`), which bundlers resolve and Node
        // does not: let vitest transform it as the CLI bundle does.
        inline: ['clipanion'],
      },
    },
    coverage: {
      provider: 'v8',
      include: [
        'client/src/**',
        'ssh/src/**',
        'manifest/src/**',
        'server/src/**',
        'cli/src/**',
        'simulator/src/**',
      ],
      reporter: ['text-summary'],
    },
  },
});
