/**
 * The service's base URL as a client names it. With `SVC_PUBLIC_URL` set, that and nothing else.
 * Without it, on a loopback address, `localhost` and `127.0.0.1` are one machine to a developer
 * (the README uses the one, `npm start` prints the other): a request that names the service's own
 * port under either loopback name gets that name back. Any other Host is ignored, so a client can
 * never make the service claim to be somewhere else.
 */
const loopbackNames = new Set(['localhost', '127.0.0.1', '[::1]']);

export function baseUrlFor(ownUrl: string, requestHost: string | undefined): string {
  if (!requestHost) return ownUrl;
  const own = new URL(ownUrl);
  if (own.protocol !== 'http:' || !loopbackNames.has(own.hostname)) return ownUrl;
  let asked: URL;
  try {
    asked = new URL(`http://${requestHost}`);
  } catch {
    return ownUrl;
  }
  const sameEndpoint = loopbackNames.has(asked.hostname) && asked.port === own.port && asked.pathname === '/';
  return sameEndpoint && !asked.username && !asked.password ? `http://${asked.host}` : ownUrl;
}
