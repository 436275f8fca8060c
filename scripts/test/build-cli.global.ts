/**
 * vitest's global setup: the SDK package, the CLI bundle, the web console and the production build
 * of the service (`npm run serve`, `npm run migrate`) are built once, before
 * any test file runs (a service started as `npm start` starts serves console/dist). Test files run in parallel; one rebuilding a dist/ while another reads from it would pull
 * it away.
 */

import { serverBundleVariable } from '../../server/test/support/service-process.ts';
import { buildCli } from '../build-cli.ts';
import { buildConsole } from '../build-console.ts';
import { buildSdk } from '../build-sdk.ts';
import { buildServer, serverBundle } from '../build-server.ts';

export default async function setup(): Promise<void> {
  buildSdk();
  await buildCli();
  await buildConsole();
  await buildServer();
  // Test workers inherit the environment, and the service processes they start run this build
  // instead of compiling the source again each through tsx.
  process.env[serverBundleVariable] = serverBundle;
}
