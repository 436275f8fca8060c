/**
 * The Redis the key-value tests use: `SVC_TEST_REDIS_URL`, else the one on this machine's 6379.
 * Where none answers the Redis tests skip, saying so; CI sets SVC_REQUIRE_REDIS=1 so a missing
 * Redis fails there instead.
 */
import { connect } from 'node:net';

export const testRedisUrl = process.env.SVC_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** Why the Redis tests cannot run here, or undefined when they can. */
export async function redisMissing(): Promise<string | undefined> {
  const { hostname, port } = new URL(testRedisUrl);
  const answers = await new Promise<boolean>((resolve) => {
    const socket = connect({ host: hostname, port: Number(port || 6379), timeout: 2000 });
    const answer = (connected: boolean) => {
      socket.destroy();
      resolve(connected);
    };
    socket.once('connect', () => answer(true));
    socket.once('error', () => answer(false));
    socket.once('timeout', () => answer(false));
  });
  if (answers) return undefined;
  const reason = `no Redis answers at ${testRedisUrl}: start one (or set SVC_TEST_REDIS_URL)`;
  if (process.env.SVC_REQUIRE_REDIS === '1') throw new Error(`SVC_REQUIRE_REDIS=1, but there is ${reason}`);
  return reason;
}
