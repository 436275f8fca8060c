/**
 * `npm run typecheck`: the three TypeScript projects (the workspaces, the console in the browser's
 * lib, the console's tests), as many at once as the machine has cores: each `tsc` uses one core,
 * and one after another they took a minute and a half of CI's time. Each project's errors are
 * printed together, under its name; any error fails the run.
 */
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';

const projects = ['tsconfig.json', 'console/tsconfig.json', 'console/test/tsconfig.json'];
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

function check(project: string): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [tsc, '-p', project], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    child.stderr.on('data', (chunk) => {
      output += chunk;
    });
    child.on('close', (code) => {
      if (code !== 0) process.stdout.write(`tsc -p ${project} failed:\n${output}\n`);
      resolve(code === 0);
    });
  });
}

const waiting = [...projects];
const lane = async (): Promise<boolean> => {
  let ok = true;
  for (let project = waiting.shift(); project; project = waiting.shift()) ok = (await check(project)) && ok;
  return ok;
};
const lanes = Array.from({ length: Math.min(projects.length, Math.max(1, availableParallelism())) }, lane);
if (!(await Promise.all(lanes)).every(Boolean)) process.exit(1);
