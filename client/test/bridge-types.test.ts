/**
 * The runtime and host entries as a mini-app or host page sees them: their published `.d.ts`
 * (client/dist, built by the tests' global setup), compiled with the DOM library, as a browser
 * project would. The SDK's own code declares the few window and iframe types it uses
 * (runtime/message-window.ts); this proves a DOM `HTMLIFrameElement` is such a frame.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, test } from 'vitest';

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const project = join(import.meta.dirname, 'fixtures/bridge-in-dom/tsconfig.json');

describe('the bridge types in a browser project', () => {
  test('when an app and a host page are compiled against @svc/sdk/runtime and @svc/sdk/host with the DOM library then they type-check', () => {
    const run = spawnSync(process.execPath, [tsc, '-p', project], { encoding: 'utf8' });
    assert.equal(run.status, 0, `${run.stdout}${run.stderr}`);
  });
});
