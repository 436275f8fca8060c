/**
 * `npm run check:generated`: regenerates into a temporary folder and fails when generated/ differs;
 * fails too when docs/configuration.md is not what the settings' table makes.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generate } from './generate.ts';
import { repoRoot } from './repo-root.ts';

const fresh = mkdtempSync(join(tmpdir(), 'svc-generated-'));
try {
  const expected = await generate(repoRoot, fresh);
  const committed = join(repoRoot, 'generated');
  const present = existsSync(committed) ? readdirSync(committed) : [];
  const read = (dir: string, name: string) =>
    existsSync(join(dir, name)) ? readFileSync(join(dir, name), 'utf8') : undefined;

  const stale = expected.filter((name) => read(committed, name) !== read(fresh, name));
  const extra = present.filter((name) => !expected.includes(name));
  if (stale.length > 0 || extra.length > 0) {
    for (const name of stale)
      process.stderr.write(`generated/${name} differs from what the contract makes\n`);
    for (const name of extra) process.stderr.write(`generated/${name} is not made by the generator\n`);
    process.stderr.write('generated/ is out of date: run `npm run generate` and commit the result.\n');
    process.exitCode = 1;
  } else {
    process.stdout.write(`generated/ is up to date (${expected.length} files)\n`);
  }
  const { configurationPage, renderConfigurationPage } = await import('./generate-config-docs.ts');
  if (read(repoRoot, configurationPage) !== renderConfigurationPage()) {
    process.stderr.write(
      `${configurationPage} differs from the settings in server/src/config.ts: run \`npm run generate\` and commit the result.\n`,
    );
    process.exitCode = 1;
  }
} finally {
  rmSync(fresh, { recursive: true, force: true });
}
