#!/usr/bin/env node
// The `svc` command: runs the bundle that `npm run build:cli` makes (npm ci builds it too).
import { existsSync } from 'node:fs';

const bundle = new URL('../dist/svc.js', import.meta.url);
if (!existsSync(bundle)) {
  process.stderr.write('svc: the CLI is not built yet: run `npm run build:cli` in the svc repository.\n');
  process.exit(1);
}
await import(bundle.href);
