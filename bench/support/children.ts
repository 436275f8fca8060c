/**
 * A benchmark's child processes: the same file run again in another mode (`serve`, `count`, …),
 * so that the service, the baselines and the load do not share an event loop. Each child waits
 * for its order, reports ready, answers questions, and stops cleanly when the parent disconnects
 * (a normal exit lets --cpu-prof write its profile).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export function errorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  // fetch says only "fetch failed"; the reason is its cause.
  return error.cause
    ? `${error.stack}\ncaused by: ${errorText(error.cause)}`
    : (error.stack ?? error.message);
}

type Report<Ready> = { ready: Ready } | { failed: string };
type Asked<Question> = Question & { id: number };
interface Answer<Reply> {
  id: number;
  reply: Reply;
}

/** What a child runs: started from its order, it answers the parent's questions until stopped. */
export interface RunningChild<Ready, Question, Reply> {
  ready: Ready;
  answer(question: Question): Promise<Reply>;
  stop(): Promise<void>;
}

/** In the child: runs what `start` makes of the parent's order. */
export function runChild<Order, Ready, Question, Reply>(
  start: (order: Order) => Promise<RunningChild<Ready, Question, Reply>>,
): void {
  const send = (message: Report<Ready> | Answer<Reply>) => process.send?.(message);
  const fail = (error: unknown) => {
    process.stderr.write(`${errorText(error)}\n`);
    process.exit(1);
  };
  process.once('message', (order: Order) => {
    start(order).then(
      (running) => {
        process.on('message', ({ id, ...question }: Asked<Question>) => {
          running.answer(question as Question).then((reply) => send({ id, reply }), fail);
        });
        process.once('disconnect', () => {
          running.stop().then(() => process.exit(0), fail);
        });
        send({ ready: running.ready });
      },
      (error: unknown) => {
        send({ failed: errorText(error) });
        process.exit(1);
      },
    );
  });
}

/** In the parent: a child that started and said it is ready. */
export interface Child<Ready, Question, Reply> {
  ready: Ready;
  ask(question: Question): Promise<Reply>;
  stop(): Promise<void>;
  /** Ends it at once (SIGKILL), for one whose stop does not end. */
  kill(): void;
  logFile: string;
}

export interface ChildOptions<Order> {
  /** The benchmark's own file (`import.meta.url`), run again in `mode`. */
  script: string;
  mode: string;
  /** The configuration, in messages and in the log file's name. */
  label: string;
  order: Order;
  /** A folder for a V8 CPU profile of this child, if wanted. */
  cpuProfDir?: string;
}

/** Starts `script` in `mode`, sends it `order`, and waits for it to be ready. */
export async function spawnChild<Order, Ready, Question, Reply>(
  options: ChildOptions<Order>,
): Promise<Child<Ready, Question, Reply>> {
  const { mode, label } = options;
  const script = fileURLToPath(options.script);
  const profiling = options.cpuProfDir
    ? ['--cpu-prof', `--cpu-prof-dir=${join(options.cpuProfDir, label)}`]
    : [];
  // A child's log goes to a file, as in production; a terminal would slow it and bury the results.
  // The run's process id in its name: two runs at once do not write over each other's logs.
  const bench = script.replace(/^.*\//, '').replace(/\.ts$/, '');
  const logFile = join(tmpdir(), `svc-bench-${bench}-${process.pid}-${label}-${mode}.log`);
  const log = openSync(logFile, 'w');
  const child: ChildProcess = fork(script, [mode], {
    execArgv: ['--import', import.meta.resolve('tsx'), ...profiling],
    stdio: ['ignore', 'inherit', log, 'ipc'],
  });
  closeSync(log);
  // A child that died is reported by its exit, below; sending to it must not crash this process.
  child.on('error', () => {});
  const exited = once(child, 'exit');
  const failedEarly = exited.then(([code]) => {
    throw new Error(`the ${mode} process of ${label} exited (${code}); its log: ${logFile}`);
  });
  failedEarly.catch(() => {});
  child.send(options.order as object);
  const [report] = (await Promise.race([once(child, 'message'), failedEarly])) as [Report<Ready>];
  if ('failed' in report) throw new Error(`the ${mode} process of ${label} did not start:\n${report.failed}`);
  let asked = 0;
  return {
    ready: report.ready,
    logFile,
    async ask(question) {
      const id = ++asked;
      const answered = new Promise<Reply>((resolveAnswer) => {
        const listen = (message: Answer<Reply>) => {
          if (message.id !== id) return;
          child.off('message', listen);
          resolveAnswer(message.reply);
        };
        child.on('message', listen);
      });
      if (child.connected) child.send({ ...question, id } satisfies Asked<Question>);
      return Promise.race([answered, failedEarly]);
    },
    kill() {
      child.kill('SIGKILL');
    },
    async stop() {
      if (child.connected) child.disconnect();
      const [code] = await exited;
      if (code !== 0)
        throw new Error(`the ${mode} process of ${label} exited with ${code}; its log: ${logFile}`);
    },
  };
}
