/** `npm start`: the service in one process, embedded storage unless DATABASE_URL says otherwise. */
import { join } from 'node:path';
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
  const { url } = await service.start();
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
      `Stop with Ctrl-C.`,
      '',
    ].join('\n'),
  );

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info('stopping: finishing in-flight requests', {
      signal,
      graceSeconds: config.shutdownGraceSeconds,
    });
    service.stop().then(
      ({ cut }) => {
        const requests =
          cut === 0
            ? 'requests finished'
            : `${cut} request${cut === 1 ? '' : 's'} cut after the ${config.shutdownGraceSeconds} s grace`;
        process.stdout.write(`svc stopped: ${requests}, store closed.\n`);
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

await main();
