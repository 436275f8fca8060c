/**
 * One delivery attempt of a webhook: a POST over HTTP(S) to a URL an endpoint's owner chose, so to
 * anything they like, the service's own network included (server-side request forgery). Two checks
 * keep it to the public internet unless private addresses are allowed (a private network, tests):
 *
 * - at registration, `checkWebhookUrl`: https only, no credentials or fragment, a host written as
 *   an address must be a public one, and `localhost` is refused by name; before each attempt the
 *   same again, but for the name (its resolution says it then);
 * - at every connection, the addresses the host name resolves to *then* (a name that pointed to a
 *   public address when it was registered may point to 127.0.0.1 now): the request's own `lookup`
 *   refuses the connection when any of them is not public. Node calls `lookup` only for names, so
 *   a host written as an address is checked before the request.
 *
 * An attempt has one time bound for everything (resolving, connecting, TLS, sending, the answer),
 * reads at most `maxResponseBytes` of the answer and keeps its first KiB, follows no redirect, and
 * never throws for what a receiver does: every outcome is an AttemptResult.
 */
import { type LookupAddress, lookup as systemLookup } from 'node:dns';
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { performance } from 'node:perf_hooks';
import ipaddr from 'ipaddr.js';

/** Longer URLs are refused at registration: some proxies and logs cut at 2 KiB. */
export const maxWebhookUrlLength = 2048;

/** How much of an answer an attempt keeps, for its owner to read. */
const responsePreviewBytes = 1024;

/** Answers whose headers are larger are refused (Node's default, said here so the message can name it). */
const maxAnswerHeaderBytes = 16 * 1024;

/** Why a URL is refused; at registration, and again before each attempt. */
export type WebhookUrlProblem =
  | 'invalid_url'
  | 'url_too_long'
  | 'unsupported_scheme'
  | 'credentials_in_url'
  | 'fragment_in_url'
  | 'address_refused';

export type WebhookUrlCheck = { ok: true; url: URL } | { ok: false; code: WebhookUrlProblem; detail: string };

export interface WebhookUrlOptions {
  /** Allow http:// and private, loopback and link-local addresses: a private network, or tests. */
  allowPrivate: boolean;
}

/** Why an attempt failed. */
export type AttemptError =
  | WebhookUrlProblem
  /** The host name has no address (ENOTFOUND), or the resolver failed. */
  | 'name_not_resolved'
  /** Refused, reset or unreachable before an answer came. */
  | 'connection_failed'
  /** The TLS handshake failed: an untrusted, expired or wrong-name certificate, or no TLS at all. */
  | 'tls_failed'
  /** No answer within the attempt's time. */
  | 'timeout'
  /** A 3xx: svc follows no redirect. */
  | 'redirect'
  /** The answer is not HTTP that Node can read. */
  | 'invalid_answer'
  /** The answer's headers are larger than 16 KiB. */
  | 'answer_too_large';

export interface AttemptResult {
  /** `delivered` for a 2xx answer; anything else failed. */
  outcome: 'delivered' | 'failed';
  /** The answer's status, when one came. */
  status?: number;
  /** From the start of the attempt to its end, in whole milliseconds. */
  durationMs: number;
  /** The first KiB (at most) of the answer's body, as text; '' when none came. */
  response: string;
  error?: AttemptError;
  /** What happened, for the endpoint's owner to read (never the request's headers or secrets). */
  detail?: string;
}

export interface WebhookRequest {
  url: string;
  /** webhookHeaders(…): the signature, content type and user agent. */
  headers: Record<string, string>;
  /** The body exactly as signed. */
  body: string;
}

/** Resolves a host name to all its addresses, as dns.lookup with `all: true` does. */
export type ResolveHost = (hostname: string) => Promise<LookupAddress[]>;

export interface WebhookSenderOptions {
  /** The whole attempt, from resolving the name to the end of the answer (the spec advises 15 to 30 s). */
  timeoutMs: number;
  /** Read at most this much of an answer's body; past it the connection is closed. */
  maxResponseBytes: number;
  /** As for checkWebhookUrl; also lets names resolve to private addresses. */
  allowPrivate: boolean;
  /** How names are resolved: the system's resolver (dns.lookup) unless a test gives another. */
  lookup?: ResolveHost;
  /** Certificate authorities to trust instead of Node's: a private CA, or a test's. */
  ca?: string | Buffer | Array<string | Buffer>;
}

export interface WebhookSender {
  send(request: WebhookRequest): Promise<AttemptResult>;
}

/** What an address is, in words, when it is not public; undefined for a public unicast address. */
function nonPublicKind(ip: string): string | undefined {
  if (!ipaddr.isValid(ip)) return 'not an IP address';
  const address = ipaddr.parse(ip);
  if (address.kind() === 'ipv4') return ipv4Kind(address as ipaddr.IPv4);
  const v6 = address as ipaddr.IPv6;
  const range: string = v6.range();
  // An IPv6 form of an IPv4 address reaches that IPv4 address: judge that one. NAT64's well-known
  // prefix carries only public IPv4 addresses (RFC 6052); its local-use prefix is a local network.
  if (range === 'ipv4Mapped' || range === 'rfc6145' || (range === 'rfc6052' && v6.match(wellKnownNat64))) {
    const embedded = ipv4Kind(embeddedIpv4(v6));
    return embedded && `${embedded}, written as IPv6`;
  }
  if (range !== 'unicast') return ipv6Kinds[range] ?? `a special-purpose IPv6 address (${range})`;
  // ::a.b.c.d, IPv4-compatible (deprecated by RFC 4291), which ipaddr.js calls unicast.
  if (v6.match(ipv4Compatible)) return 'an IPv4-compatible IPv6 address (deprecated, never public)';
  return undefined;
}

const wellKnownNat64 = ipaddr.parseCIDR('64:ff9b::/96');
const ipv4Compatible = ipaddr.parseCIDR('::/96');

function embeddedIpv4(address: ipaddr.IPv6): ipaddr.IPv4 {
  const bytes = address.toByteArray().slice(12);
  return new ipaddr.IPv4(bytes);
}

function ipv4Kind(address: ipaddr.IPv4): string | undefined {
  const range: string = address.range();
  return range === 'unicast' ? undefined : (ipv4Kinds[range] ?? `a special-purpose address (${range})`);
}

const ipv4Kinds: Record<string, string> = {
  unspecified: 'an unspecified address (0.0.0.0/8, which reaches this machine)',
  loopback: 'a loopback address (this machine)',
  private: 'a private network address (10/8, 172.16/12, 192.168/16)',
  linkLocal: 'a link-local address (169.254/16, where the cloud metadata service answers)',
  carrierGradeNat: 'a carrier-grade NAT address (100.64/10, shared, not public)',
  multicast: 'a multicast address',
  broadcast: 'the broadcast address',
  reserved: 'a reserved or documentation address',
};

const ipv6Kinds: Record<string, string> = {
  unspecified: 'the unspecified address (::, which reaches this machine)',
  loopback: 'the loopback address (::1, this machine)',
  linkLocal: 'a link-local address (fe80::/10)',
  uniqueLocal: 'a unique-local address (fc00::/7, a private network)',
  deprecatedSiteLocal: 'a site-local address (fec0::/10, a private network)',
  multicast: 'a multicast address',
  rfc6052: 'a local-use NAT64 address (64:ff9b:1::/48)',
  '6to4': 'a 6to4 address (2002::/16, which tunnels to an IPv4 address)',
  teredo: 'a Teredo address (2001::/32, which tunnels to an IPv4 address)',
  reserved: 'a reserved or documentation address',
};

/**
 * Whether svc refuses to connect to this address: anything but public unicast (loopback, private,
 * link-local with the cloud metadata service, unique-local, CGNAT, multicast, broadcast, reserved
 * and documentation ranges, and the IPv6 forms of those IPv4 ones). Not an address: refused.
 */
export function isBlockedAddress(ip: string): boolean {
  return nonPublicKind(ip) !== undefined;
}

function refuse(code: WebhookUrlProblem, detail: string): WebhookUrlCheck {
  return { ok: false, code, detail };
}

/** The host of a URL as Node's connect takes it: IPv6 without its brackets. */
function hostOf(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/** Whether a URL may be an endpoint. The URL to store and send to is the one returned (normalised). */
export function checkWebhookUrl(url: string, { allowPrivate }: WebhookUrlOptions): WebhookUrlCheck {
  const checked = checkUrlShape(url, allowPrivate);
  if (!checked.ok || allowPrivate) return checked;
  // `localhost` always means the machine that resolves it (RFC 6761): said at once here, rather
  // than at the first attempt, where the resolved address is refused all the same.
  const name = hostOf(checked.url).replace(/\.$/, '');
  if (name === 'localhost' || name.endsWith('.localhost')) {
    return refuse(
      'address_refused',
      `${name} is this machine: this service sends webhooks only to public addresses. To receive ` +
        'webhooks on your own machine, expose it through a tunnel with a public https:// URL',
    );
  }
  return checked;
}

/** What is checked before each attempt too: the scheme, no credentials or fragment, an address host. */
function checkUrlShape(url: string, allowPrivate: boolean): WebhookUrlCheck {
  if (url.length > maxWebhookUrlLength) {
    return refuse(
      'url_too_long',
      `the URL is ${url.length} characters long; at most ${maxWebhookUrlLength} are accepted`,
    );
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return refuse(
      'invalid_url',
      'this is not a URL: write it whole, such as https://example.com/webhooks/svc',
    );
  }
  if (parsed.protocol === 'http:' && !allowPrivate) {
    return refuse(
      'unsupported_scheme',
      'the URL must start with https://: a webhook carries your data, and only TLS keeps it private on ' +
        'the way. (This service accepts http:// only where it allows private addresses: private ' +
        'networks and tests often have no TLS.)',
    );
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') {
    return refuse(
      'unsupported_scheme',
      `the URL must start with https://${allowPrivate ? ' or http://' : ''}, not ${parsed.protocol}`,
    );
  }
  if (parsed.username !== '' || parsed.password !== '') {
    return refuse(
      'credentials_in_url',
      'the URL holds a user name or password (user:password@host): remove it. svc signs every ' +
        'webhook; check the webhook-signature header to know a request is from svc',
    );
  }
  if (url.includes('#')) {
    return refuse(
      'fragment_in_url',
      'the URL has a fragment (#…), which is never sent to a server: remove it, or put what it says in the path or query',
    );
  }
  // Node resolves no address, so its lookup never sees one: an address host is checked here.
  const host = hostOf(parsed);
  const kind = !allowPrivate && isIP(host) ? nonPublicKind(host) : undefined;
  if (kind) {
    return refuse(
      'address_refused',
      `${host} is ${kind}: this service sends webhooks only to public addresses. To receive ` +
        'webhooks on a machine of your own, expose it through a tunnel with a public https:// URL',
    );
  }
  return { ok: true, url: parsed };
}

/** A connection the guard refused: the name resolved to an address that is not public. */
class AddressRefused extends Error {
  readonly detail: string;

  constructor(detail: string) {
    super(detail);
    this.detail = detail;
  }
}

function familyOf(family: unknown): 4 | 6 | undefined {
  if (family === 4 || family === 'IPv4') return 4;
  if (family === 6 || family === 'IPv6') return 6;
  return undefined;
}

/** The `lookup` of each request: resolves the name now and refuses it if any address is not public. */
function guardedLookup(resolve: ResolveHost, allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (addresses) => {
        if (!allowPrivate) {
          for (const { address } of addresses) {
            const kind = nonPublicKind(address);
            if (kind) {
              callback(
                new AddressRefused(
                  `${hostname} resolves to ${address}, ${kind}: this service sends webhooks only to public addresses`,
                ),
                '',
              );
              return;
            }
          }
        }
        const family = familyOf(options.family);
        const usable = family ? addresses.filter((entry) => entry.family === family) : addresses;
        const [first] = usable;
        if (!first) {
          callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '');
        } else if (options.all) {
          callback(null, usable);
        } else {
          callback(null, first.address, first.family);
        }
      },
      (error: NodeJS.ErrnoException) => callback(error, ''),
    );
  };
}

const resolveWithSystem: ResolveHost = (hostname) =>
  new Promise((resolve, reject) =>
    systemLookup(hostname, { all: true, verbatim: true }, (error, addresses) =>
      error ? reject(error) : resolve(addresses),
    ),
  );

const tlsErrorCodes = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_REVOKED',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'EPROTO',
]);

/** An error of the request, before any answer, as an attempt's error and a sentence. */
function describeFailure(error: Error, url: URL): Pick<AttemptResult, 'error' | 'detail'> {
  if (error instanceof AddressRefused) return { error: 'address_refused', detail: error.detail };
  const cause = error as NodeJS.ErrnoException & { errors?: NodeJS.ErrnoException[] };
  // With several addresses Node tries each and reports them together (an AggregateError).
  const code = cause.code ?? cause.errors?.[0]?.code ?? '';
  const where = `${hostOf(url)}:${url.port || (url.protocol === 'https:' ? 443 : 80)}`;
  if (['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'ENODATA', 'ESERVFAIL'].includes(code)) {
    return {
      error: 'name_not_resolved',
      detail: `${hostOf(url)} could not be resolved (${code}): check the host name, and that it has public DNS records`,
    };
  }
  if (tlsErrorCodes.has(code) || code.startsWith('ERR_TLS_') || code.startsWith('ERR_SSL_')) {
    return {
      error: 'tls_failed',
      detail: `the TLS handshake with ${where} failed (${code}: ${cause.message}): the endpoint needs a certificate from a public CA, valid and for this host name`,
    };
  }
  if (code === 'HPE_HEADER_OVERFLOW') {
    return {
      error: 'answer_too_large',
      detail: `the answer's headers are larger than ${maxAnswerHeaderBytes / 1024} KiB`,
    };
  }
  if (code.startsWith('HPE_')) {
    return { error: 'invalid_answer', detail: `the answer from ${where} is not HTTP svc can read (${code})` };
  }
  const what: Record<string, string> = {
    ECONNREFUSED: 'nothing accepts connections there',
    ECONNRESET: 'the connection was closed before an answer came',
    EHOSTUNREACH: 'the host cannot be reached',
    ENETUNREACH: 'the network cannot be reached',
    ETIMEDOUT: 'the connection timed out',
  };
  return {
    error: 'connection_failed',
    detail: `${what[code] ?? 'the connection failed'} (${where}, ${code || cause.message})`,
  };
}

/** A sender of attempts, with its bounds; one for the whole service. */
export function createWebhookSender(options: WebhookSenderOptions): WebhookSender {
  const { timeoutMs, maxResponseBytes, allowPrivate, ca } = options;
  const lookup = guardedLookup(options.lookup ?? resolveWithSystem, allowPrivate);
  const previewBytes = Math.min(responsePreviewBytes, maxResponseBytes);

  function send({ url, headers, body }: WebhookRequest): Promise<AttemptResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const checked = checkUrlShape(url, allowPrivate);
    if (!checked.ok) {
      return Promise.resolve({
        outcome: 'failed',
        durationMs: elapsed(),
        response: '',
        error: checked.code,
        detail: checked.detail,
      });
    }
    const target = checked.url;

    return new Promise((resolve) => {
      let settled = false;
      let request: http.ClientRequest | undefined;
      let answer: IncomingMessage | undefined;
      const kept: Buffer[] = [];
      let keptBytes = 0;
      let readBytes = 0;

      const finish = (result: Omit<AttemptResult, 'durationMs' | 'response'>) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        // Whatever is still open (a body not read to its end, a hanging server) is closed now.
        request?.destroy();
        answer?.destroy();
        const response = new TextDecoder().decode(Buffer.concat(kept), { stream: true });
        resolve({ ...result, durationMs: elapsed(), response });
      };

      /** The outcome once the status is known: the status decides, whatever the body does. */
      const answered = (note?: string) => {
        const status = answer?.statusCode ?? 0;
        const reason = `${status} ${http.STATUS_CODES[status] ?? ''}`.trim();
        if (status >= 200 && status < 300) {
          finish({ outcome: 'delivered', status, ...(note ? { detail: note } : {}) });
        } else if (status >= 300 && status < 400) {
          const location = answer?.headers.location;
          let pointed = 'nowhere (no Location)';
          if (location) {
            try {
              pointed = `to ${new URL(location, target).href}`;
            } catch {
              pointed = `to ${JSON.stringify(location.slice(0, 200))}`;
            }
          }
          finish({
            outcome: 'failed',
            status,
            error: 'redirect',
            detail: `the endpoint answered ${reason}, pointing ${pointed}: svc follows no redirect, register the URL it points to instead`,
          });
        } else {
          finish({
            outcome: 'failed',
            status,
            detail: `the endpoint answered ${reason}; svc counts only 2xx as delivered${note ? `. ${note}` : ''}`,
          });
        }
      };

      const timer = setTimeout(() => {
        if (answer) {
          answered(`the answer's body did not end within ${timeoutMs} ms; svc stopped reading it`);
        } else {
          finish({
            outcome: 'failed',
            error: 'timeout',
            detail: `no answer within ${timeoutMs} ms: answer at once (2xx) and do slow work after`,
          });
        }
      }, timeoutMs);

      try {
        request = (target.protocol === 'https:' ? https : http).request({
          protocol: target.protocol,
          hostname: hostOf(target),
          port: target.port || undefined,
          path: `${target.pathname}${target.search}`,
          method: 'POST',
          headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
          // A connection of its own each time: each one resolves and checks the name again.
          agent: false,
          lookup,
          maxHeaderSize: maxAnswerHeaderBytes,
          ...(ca ? { ca } : {}),
        });
      } catch (error) {
        finish({ outcome: 'failed', ...describeFailure(error as Error, target) });
        return;
      }
      request.on('error', (error) => {
        if (answer) answered();
        else finish({ outcome: 'failed', ...describeFailure(error, target) });
      });
      request.on('response', (response) => {
        answer = response;
        response.on('data', (chunk: Buffer) => {
          readBytes += chunk.length;
          if (keptBytes < previewBytes) {
            const part = Buffer.from(chunk.subarray(0, previewBytes - keptBytes));
            kept.push(part);
            keptBytes += part.length;
          }
          if (readBytes > maxResponseBytes) {
            answered(
              `the answer's body is longer than ${maxResponseBytes} bytes; svc read that much and closed the connection`,
            );
          }
        });
        response.on('end', () => answered());
        // Cut mid-body: the status is known all the same.
        response.on('error', () => answered());
        response.on('close', () => answered());
      });
      request.end(body);
    });
  }

  return { send };
}
