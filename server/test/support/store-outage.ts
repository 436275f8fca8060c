/** What the store-outage suites assert of the service: a 503 a client can retry, and what it logged. */
import assert from 'node:assert/strict';
import type { Reply } from './http.ts';
import type { TestService } from './service.ts';

/** A 503 problem `service_unavailable` with a Retry-After of whole seconds. */
export function assertUnavailable(reply: Reply, what: string): void {
  assert.equal(reply.status, 503, `${what}: ${JSON.stringify(reply.body)}`);
  assert.match(String(reply.headers['content-type']), /^application\/problem\+json/);
  assert.equal(reply.body.code, 'service_unavailable', what);
  const retryAfter = Number(reply.headers['retry-after']);
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1, `${what}: Retry-After ${retryAfter}`);
}

/** What the service logged since `from` besides its request lines: level and the store's reason, if any. */
export function logsSince(
  service: TestService,
  from: number,
): { level: string; message: string; reason?: string }[] {
  return service.logs
    .slice(from)
    .map((line) => JSON.parse(line))
    .filter((line) => line.message !== 'request');
}
