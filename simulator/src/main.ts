/** The `svc-car-sim` process: the command on this process's streams, stopped by Ctrl-C or SIGTERM. */
import { runCli } from './cli.ts';

const stopping = new AbortController();
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    process.stderr.write('stopping: every car says offline and disconnects\n');
    stopping.abort();
  });
}

process.exitCode = await runCli(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  stop: stopping.signal,
});
// Nothing of the fleet is left running; a lingering socket must not keep the process alive.
process.exit();
