#!/usr/bin/env node
/** The `svc` binary. */
import { homedir } from 'node:os';
import { runCli } from './cli.ts';

const stdout = process.stdout;
process.exitCode = await runCli(process.argv.slice(2), {
  env: process.env,
  stdin: process.stdin,
  stdout,
  stderr: process.stderr,
  colorDepth: stdout.isTTY ? stdout.getColorDepth() : 1,
  home: homedir(),
});
