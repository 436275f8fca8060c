/**
 * vitest's global setup: the SDK package and the CLI bundle are built once, before any test file
 * runs. Test files run in parallel; one rebuilding a dist/ while another reads from it would pull
 * it away.
 */
import { buildCli } from '../build-cli.ts';
import { buildSdk } from '../build-sdk.ts';

export default async function setup(): Promise<void> {
  buildSdk();
  await buildCli();
}
