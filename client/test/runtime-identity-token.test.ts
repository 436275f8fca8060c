/**
 * The runtime's reuse of an identity token, in Node against a host played in-process (the
 * browser suite, host-bridge.test.ts, cannot hold timers back): a token is given again only while
 * it has more than a minute to live, judged when the app asks, whatever the page's timers did.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test, vi } from 'vitest';
import { connectHost } from '../src/runtime/index.ts';
import type { BridgeMessageEvent, MessageWindow } from '../src/runtime/message-window.ts';
import { bridgeProtocol, bridgeVersion, hostOriginParameter } from '../src/runtime/protocol.ts';

const hostOrigin = 'https://host.example';
const minute = 60_000;

/** A token the host signed at `at`, for 10 minutes, told apart by its payload. */
function tokenAt(at: number, serial: number) {
  return {
    token: `eyJhbGciOiJFUzI1NiJ9.eyJuIjo${serial}fQ.c2ln`,
    expiresAt: new Date(at + 10 * minute).toISOString(),
  };
}

/**
 * An app's window inside a host that answers `connect` with one car and each `identityToken`
 * with a fresh token; `asked` counts the tokens it signed.
 */
function embeddedApp() {
  const listeners = new Set<(event: BridgeMessageEvent) => void>();
  const host = { asked: 0 };
  const parent: MessageWindow = {
    get parent() {
      return parent;
    },
    location: { href: `${hostOrigin}/`, origin: hostOrigin },
    postMessage(message) {
      const { id, method } = message as { id: string; method: string };
      const result =
        method === 'connect'
          ? {
              appId: 'com.example.hello-car',
              activeCarId: 'brand_a:1HGCM82633A004352',
              brand: 'brand_a',
              locale: 'en-GB',
            }
          : tokenAt(Date.now(), ++host.asked);
      const data = { protocol: bridgeProtocol, version: bridgeVersion, kind: 'response', id, result };
      // As postMessage does: the answer arrives in a later task.
      setImmediate(() => {
        for (const listener of listeners) listener({ source: parent, origin: hostOrigin, data });
      });
    },
    addEventListener() {},
    removeEventListener() {},
  };
  const app: MessageWindow = {
    parent,
    location: {
      href: `https://app.example/index.html?${hostOriginParameter}=${encodeURIComponent(hostOrigin)}`,
      origin: 'https://app.example',
    },
    postMessage() {},
    addEventListener: (_type, listener) => listeners.add(listener),
    removeEventListener: (_type, listener) => listeners.delete(listener),
  };
  return { app, host };
}

afterEach(() => {
  vi.useRealTimers();
  delete (globalThis as { window?: unknown }).window;
});

describe('ctx.identityToken()', () => {
  test('when the cached token has less than a minute left but its timer has not run (a throttled tab) then the host is asked for a new one', async () => {
    // Only the clock moves: the runtime's timers stay where a background tab's would.
    vi.useFakeTimers({ toFake: ['Date'] });
    const { app, host } = embeddedApp();
    (globalThis as { window?: unknown }).window = app;
    const ctx = await connectHost();

    const first = await ctx.identityToken();
    vi.setSystemTime(Date.now() + 8 * minute);
    assert.deepEqual(await ctx.identityToken(), first, 'two minutes left: the same token');
    assert.equal(host.asked, 1);

    vi.setSystemTime(Date.now() + 90_000);
    const second = await ctx.identityToken();
    assert.equal(host.asked, 2, 'thirty seconds left: the host signs another');
    assert.notEqual(second.token, first.token);
    assert.ok(Date.parse(second.expiresAt) - Date.now() > minute);
    ctx.close();
  });
});
