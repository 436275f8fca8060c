/**
 * Debian's Chromium, driven by playwright-core (never a downloaded browser). Where Chromium is
 * not installed the browser tests skip, saying how to install it; CI sets SVC_REQUIRE_CHROMIUM=1
 * so a missing browser fails there instead.
 */
import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

export const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Why the browser tests cannot run here, or undefined when they can. */
export function chromiumMissing(): string | undefined {
  if (existsSync(chromiumPath)) return undefined;
  const reason = `no Chromium at ${chromiumPath}: install Debian's chromium package (or set CHROMIUM_PATH)`;
  if (process.env.SVC_REQUIRE_CHROMIUM === '1')
    throw new Error(`SVC_REQUIRE_CHROMIUM=1, but there is ${reason}`);
  return reason;
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath,
    // This machine's network is closed: without these, Chromium's own background connections
    // are refused by the dozen and slow every start.
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
