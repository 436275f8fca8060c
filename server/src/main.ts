/** `npm start`: the service in one process, embedded storage unless DATABASE_URL says otherwise. */
import { join } from 'node:path';
import type { AdminCode } from './accounts/admin-codes.ts';
import { createApp } from './app.ts';
import { ConfigError, loadConfig } from './config.ts';
import { createLogger } from './logger.ts';
import { describeStore, embeddedDbDir } from './store/db.ts';

const docsDir = join(import.meta.dirname, '../dist/docs');

async function main(): Promise<void> {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`svc: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const logger = createLogger();
  const service = createApp(config, { logger, docsDir });
  const { url, adminCodes } = await service.start();
  const publicUrl = config.publicUrl ?? url;
  const store = describeStore({
    databaseUrl: config.databaseUrl,
    pgliteDir: config.databaseUrl ? undefined : embeddedDbDir(config.dataDir),
  });
  process.stdout.write(
    [
      `svc is running`,
      `  API       ${publicUrl}/api/v1`,
      `  docs      ${publicUrl}/docs`,
      `  contract  ${publicUrl}/openapi.json`,
      `  data      ${config.databaseUrl ? store : config.dataDir} (${store.split(' ')[0]})`,
      ...adminCodeLines(publicUrl, adminCodes),
      `Stop with Ctrl-C.`,
      '',
    ].join('\n'),
  );

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info('stopping: finishing in-flight requests', { signal });
    service.stop().then(
      () => {
        process.stdout.write('svc stopped: requests finished, store closed.\n');
        process.exit(0);
      },
      (error: unknown) => {
        logger.error('stop failed', { error });
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

/**
 * The operator's one-time admin codes: printed here (never logged) because only the operator sees
 * this terminal, and that is what makes a code proof that its user was made an admin on purpose.
 */
function adminCodeLines(publicUrl: string, codes: AdminCode[]): string[] {
  if (codes.length === 0) return [];
  return [
    'Admin codes, one use each, valid 24 hours (a restart prints new ones):',
    ...codes.map(({ email, code }) => `  ${email}  ${code}`),
    `  Sign in as that account (it may sign up first), then claim the role:`,
    `  curl -X POST ${publicUrl}/api/v1/account/admin-claims -H "Authorization: Bearer $TOKEN" \\`,
    `    -H 'content-type: application/json' -d '{"code":"<the code>"}'`,
  ];
}

await main();
