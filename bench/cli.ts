/**
 * `npm run bench:cli`: how fast `svc` starts. Times `svc --version` and `svc --help` (the built
 * bundle) against `node -e 0` in the same run, interleaved so that drift on the machine hits all
 * three alike; reports medians and the ratios. Goals: 1.5x and 2.5x of `node -e 0`.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { buildCli, cliDist } from '../scripts/build-cli.ts';
import { announceSmokeRun, median, positiveInteger, smokeRun } from './support/settings.ts';

announceSmokeRun('bench:cli');
const runs = positiveInteger('BENCH_RUNS', 30, 2);
// Fewer runs than that make a median that says nothing; a smoke run only shows the bench works.
if (runs < 10 && !smokeRun) throw new Error('BENCH_RUNS must be a whole number of at least 10');

const svcBinary = join(cliDist, 'svc.js');
const targets = {
  'node -e 0': ['-e', '0'],
  'svc --version': [svcBinary, '--version'],
  'svc --help': [svcBinary, '--help'],
} as const;
type Target = keyof typeof targets;
const goals: Partial<Record<Target, number>> = { 'svc --version': 1.5, 'svc --help': 2.5 };

function timeOnce(args: readonly string[]): number {
  const start = process.hrtime.bigint();
  const run = spawnSync(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NO_COLOR: '1' },
  });
  const elapsed = Number(process.hrtime.bigint() - start) / 1e6;
  if (run.status !== 0) throw new Error(`node ${args.join(' ')} exited with ${run.status}: ${run.stderr}`);
  return elapsed;
}

await buildCli();
const samples = Object.fromEntries(Object.keys(targets).map((name) => [name, [] as number[]])) as Record<
  Target,
  number[]
>;
for (const args of Object.values(targets)) timeOnce(args); // warm the file cache
for (let i = 0; i < runs; i++) {
  for (const [name, args] of Object.entries(targets) as [Target, readonly string[]][])
    samples[name].push(timeOnce(args));
}

const baseline = median(samples['node -e 0']);
process.stdout.write(`${runs} runs each, interleaved; medians\n\n`);
process.stdout.write(`${'command'.padEnd(16)}${'median ms'.padStart(10)}${'ratio'.padStart(8)}  goal\n`);
let met = true;
for (const name of Object.keys(targets) as Target[]) {
  const value = median(samples[name]);
  const ratio = value / baseline;
  const goal = goals[name];
  if (goal && ratio > goal) met = false;
  const verdict = goal ? `${ratio <= goal ? 'met' : 'NOT met'} (<= ${goal}x)` : 'baseline';
  process.stdout.write(
    `${name.padEnd(16)}${value.toFixed(1).padStart(10)}${`${ratio.toFixed(2)}x`.padStart(8)}  ${verdict}\n`,
  );
}
process.stdout.write(`\n${met ? 'all goals met' : 'a goal is NOT met'}\n`);
