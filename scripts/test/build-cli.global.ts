/**
 * vitest's global setup: the CLI bundle is built once, before any test file runs. Test files run
 * in parallel; one rebuilding cli/dist while another runs `svc` from it would pull it away.
 */
import { buildCli } from '../build-cli.ts';

export default async function setup(): Promise<void> {
  await buildCli();
}
