/**
 * vitest's global setup: the SDK package, the CLI bundle and the web console are built once, before
 * any test file runs (a service started as `npm start` starts serves console/dist). Test files run in parallel; one rebuilding a dist/ while another reads from it would pull
 * it away.
 */
import { buildCli } from '../build-cli.ts';
import { buildConsole } from '../build-console.ts';
import { buildSdk } from '../build-sdk.ts';

export default async function setup(): Promise<void> {
  buildSdk();
  await buildCli();
  await buildConsole();
}
