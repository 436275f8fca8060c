#!/usr/bin/env node
// The `svc-car-sim` command: runs the TypeScript source through tsx, which `npm ci` installs.
import { tsImport } from 'tsx/esm/api';

await tsImport('../src/main.ts', import.meta.url);
