/**
 * Both halves of webhooks together: the receiver of @svc/sdk's README ("Verify a webhook"), run as
 * an integrator runs it (`node receiver.mjs` beside the built SDK), gets what the service's signer
 * and sender send, and refuses what it must. vitest's global setup built client/dist first.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { freePort } from '../../client/test/support/pages.ts';
import { repoRoot } from '../../scripts/repo-root.ts';
import { createWebhookSender } from '../src/webhooks/webhook-sender.ts';
import { newWebhookSecret, webhookHeaders } from '../src/webhooks/webhook-signature.ts';
import { eventually } from './support/http.ts';

/** The receiver of the SDK's README: the first js block under "## Verify a webhook". */
function readmeReceiver(): string {
  const readme = readFileSync(join(repoRoot, 'client/README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Verify a webhook'));
  const code = /```js\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(code, 'client/README.md shows its receiver in a js block');
  assert.match(section, /save it as `receiver\.mjs`/, 'the README names the file as this test runs it');
  return code;
}

describe("the SDK README's webhook receiver, sent to by the service's sender", () => {
  const secret = newWebhookSecret();
  const sender = createWebhookSender({ timeoutMs: 10_000, maxResponseBytes: 64 * 1024, allowPrivate: true });
  let receiver: ChildProcess | undefined;
  let receiverDir: string;
  let url: string;
  let output = '';

  beforeAll(async () => {
    receiverDir = mkdtempSync(join(tmpdir(), 'svc-webhook-receiver-'));
    writeFileSync(join(receiverDir, 'receiver.mjs'), readmeReceiver());
    symlinkSync(join(repoRoot, 'node_modules'), join(receiverDir, 'node_modules'));
    const port = await freePort();
    url = `http://127.0.0.1:${port}/webhooks/svc`;
    receiver = spawn(process.execPath, [join(receiverDir, 'receiver.mjs')], {
      env: { PATH: process.env.PATH, SVC_WEBHOOK_SECRET: secret, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    receiver.stdout?.on('data', (chunk) => (output += chunk));
    receiver.stderr?.on('data', (chunk) => (output += chunk));
    await eventually(`the README's receiver listens (${output})`, async () => {
      if (receiver?.exitCode !== null) throw new Error(`the receiver exited:\n${output}`);
      return fetch(url, { method: 'GET' }).then(
        (reply) => reply.status === 404,
        () => false,
      );
    });
  });

  afterAll(() => {
    receiver?.kill();
    if (receiverDir) rmSync(receiverDir, { recursive: true, force: true });
  });

  const body = JSON.stringify({
    type: 'car.status_changed',
    timestamp: '2026-11-21T10:06:00.000Z',
    data: { device_id: 'brand_a:1HGCM82633A004352', online: true },
  });
  const nowSeconds = () => Math.floor(Date.now() / 1000);

  function deliver(id: string, secrets: string[], timestamp = nowSeconds(), sent = body) {
    return sender.send({ url, headers: webhookHeaders({ secrets, id, timestamp, body: sent }), body: sent });
  }

  test('when the service sends a signed webhook then the receiver verifies it, acts on it and answers 204', async () => {
    const result = await deliver('msg_readme_1', [secret]);
    assert.equal(result.outcome, 'delivered', `${result.detail} ${result.response} ${output}`);
    assert.equal(result.status, 204);
    await eventually('the receiver logs the event', () =>
      output.includes('car.status_changed {"device_id":"brand_a:1HGCM82633A004352","online":true}'),
    );
  });

  test('when the same webhook comes again (a retry) then the receiver answers 204 without acting twice', async () => {
    await deliver('msg_readme_2', [secret]);
    await eventually('the receiver logs the event', () => output.split('car.status_changed').length === 3);
    const again = await deliver('msg_readme_2', [secret], nowSeconds() + 1);
    assert.equal(again.status, 204);
    assert.equal(output.split('car.status_changed').length, 3, output);
  });

  test('when the secret rotates then a webhook signed with the new and the old secret passes a receiver with the old', async () => {
    const result = await deliver('msg_readme_3', [newWebhookSecret(), secret]);
    assert.equal(result.status, 204, result.response);
  });

  test('when a webhook is signed with another secret, or is old, or was altered then the receiver answers 400 with the code', async () => {
    const forged = await deliver('msg_readme_4', [newWebhookSecret()]);
    assert.equal(forged.outcome, 'failed');
    assert.equal(forged.status, 400);
    assert.equal(forged.response, 'invalid_signature');

    const old = await deliver('msg_readme_5', [secret], nowSeconds() - 600);
    assert.equal(old.status, 400);
    assert.equal(old.response, 'timestamp_too_old');

    const headers = webhookHeaders({ secrets: [secret], id: 'msg_readme_6', timestamp: nowSeconds(), body });
    const altered = await sender.send({
      url,
      headers,
      body: body.replace('"online":true', '"online":false'),
    });
    assert.equal(altered.status, 400);
    assert.equal(altered.response, 'invalid_signature');
    assert.match(output, /webhook refused: invalid_signature/);
  });
});
