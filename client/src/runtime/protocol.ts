/**
 * The host bridge: the versioned `postMessage` protocol between a mini-app in an iframe
 * (`@svc/sdk/runtime`) and the page that hosts it (`@svc/sdk/host`). docs/host-bridge.md describes
 * it for hosts written without this SDK; what is here is what both sides share.
 */
import type { Brand } from '../../../generated/brands.ts';
import type { CarStatus } from '../../../generated/sdk-models.ts';
import { isBrand, isValidDeviceId } from '../device-id.ts';

/** Every message of the bridge says so: a window receives other libraries' messages too. */
export const bridgeProtocol = 'svc-host-bridge';

/**
 * The one version this SDK speaks. The envelope (`protocol`, `version`, `kind`, `id`, `error`) is
 * the same in every version, so that either side can refuse another version in words the other
 * side reads.
 */
export const bridgeVersion = 1;

/** The query parameter of the app's URL through which the host names its own origin. */
export const hostOriginParameter = 'svc_host_origin';

/** What an app may ask its host; `connect` comes first and answers the app's context. */
export const bridgeMethods = ['connect', 'identityToken', 'status', 'location', 'install'] as const;
export type BridgeMethod = (typeof bridgeMethods)[number];

/** Why a bridge call failed; each is a HostError's `code`, on either side of the bridge. */
export const hostErrorCodes = [
  /** The app's page is not in a frame, so it has no host to talk to. */
  'not_embedded',
  /** No host origin was given (option or URL parameter), or it is not an origin. */
  'invalid_host_origin',
  /** The page that embeds the app is not at the origin the app was told, or allows. */
  'wrong_host_origin',
  /** No answer in time. */
  'timeout',
  /** The other side speaks another version of the protocol. */
  'version_mismatch',
  /** The host does not know the method asked for. */
  'unknown_method',
  /** A message of the protocol that does not have the shape its kind requires. */
  'invalid_message',
  /** The host does not offer this (no callback for it). */
  'not_available',
  /** The app asked about a car that is no longer the active one. */
  'inactive_car',
  /** The app has too many requests waiting on the host. */
  'too_many_requests',
  /** The host tried and failed (its callback threw something other than a HostError). */
  'host_failed',
  /** The bridge was closed on this side. */
  'closed',
] as const;

export type HostErrorCode = (typeof hostErrorCodes)[number];

/** A bridge call that failed; `code` says why, `message` what to do. */
export class HostError extends Error {
  override readonly name = 'HostError';
  readonly code: HostErrorCode;

  constructor(code: HostErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

export function isHostErrorCode(value: unknown): value is HostErrorCode {
  return typeof value === 'string' && (hostErrorCodes as readonly string[]).includes(value);
}

/** The app's context, as `connect` answers it. */
export interface HostContextData {
  appId: string;
  /** The active car's full prefixed device id (`brand_a:1HGCM82633A004352`). */
  activeCarId: string;
  brand: Brand;
  /** The user's BCP 47 language tag. */
  locale: string;
}

/** What the `activecarchange` event carries. */
export interface ActiveCarChange {
  activeCarId: string;
  brand: Brand;
}

/**
 * What the `statuschange` event carries on the wire: the active car's status as it is now. The
 * event came later in version 1: an older runtime ignores it, and an app on a host that never
 * sends it (an older one) keeps what `status()` answered.
 */
export interface StatusChangeData {
  status: CarStatus;
}

interface Envelope {
  protocol: typeof bridgeProtocol;
  version: number;
}

export interface BridgeRequest extends Envelope {
  kind: 'request';
  id: string;
  method: string;
  /** `deviceId`: the car the app takes for the active one (all methods but `connect`). */
  params: { deviceId?: string };
}

export interface BridgeResponse extends Envelope {
  kind: 'response';
  id: string;
  result?: unknown;
  error?: { code: string; message: string };
}

export type BridgeEvent = Envelope & { kind: 'event' } & (
    | { name: 'activecarchange'; data: ActiveCarChange }
    | { name: 'statuschange'; data: StatusChangeData }
  );

export type BridgeMessage = BridgeRequest | BridgeResponse | BridgeEvent;

/** Any message of the protocol, of any version: what the envelope alone says. */
export type ProtocolMessage = Envelope & Record<string, unknown>;

export function isProtocolMessage(data: unknown): data is ProtocolMessage {
  return (
    typeof data === 'object' &&
    data !== null &&
    (data as { protocol?: unknown }).protocol === bridgeProtocol &&
    typeof (data as { version?: unknown }).version === 'number'
  );
}

/** Request ids are the requester's own; short plain tokens, so that an echo can never be large. */
const requestIdPattern = /^[A-Za-z0-9_-]{1,64}$/;

export function isRequestId(value: unknown): value is string {
  return typeof value === 'string' && requestIdPattern.test(value);
}

/** As the service's IdentityTokenRequest takes it. */
const localePattern = /^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$/;

export function isLocale(value: unknown): value is string {
  return typeof value === 'string' && value.length <= 35 && localePattern.test(value);
}

/** As the service's app ids: printable, one line, at most 200 characters. */
export function isAppId(value: unknown): value is string {
  return typeof value === 'string' && /^[\x21-\x7e]{1,200}$/.test(value);
}

/** An active car as the bridge carries it: a valid prefixed device id whose prefix is `brand`. */
export function isActiveCar(value: unknown): value is ActiveCarChange {
  if (typeof value !== 'object' || value === null) return false;
  const { activeCarId, brand } = value as Record<string, unknown>;
  return isBrand(brand) && typeof activeCarId === 'string' && isValidDeviceId(activeCarId, { brand });
}

/** A CarStatus as the bridge carries it: for a valid device id of its brand, with every field's type. */
export function isCarStatus(value: unknown): value is CarStatus {
  if (typeof value !== 'object' || value === null) return false;
  const { deviceId, brand, online, lastSeen, state, reportedAt } = value as Record<string, unknown>;
  return (
    isActiveCar({ activeCarId: deviceId, brand }) &&
    typeof online === 'boolean' &&
    isTimeOrNull(lastSeen) &&
    isTimeOrNull(reportedAt) &&
    typeof state === 'object' &&
    state !== null &&
    !Array.isArray(state)
  );
}

function isTimeOrNull(value: unknown): boolean {
  return value === null || (typeof value === 'string' && !Number.isNaN(Date.parse(value)));
}

/**
 * `value` when it is an origin as browsers write one (`https://host.example`, `http://127.0.0.1:8080`:
 * scheme, host, port when not the default, nothing else); undefined otherwise.
 */
export function asOrigin(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return undefined;
  return url.origin === value ? value : undefined;
}

export function envelope(): Envelope {
  return { protocol: bridgeProtocol, version: bridgeVersion };
}

/** What a side says when the other speaks another version. */
export function versionMismatchMessage(side: 'host' | 'app', theirs: unknown): string {
  const other = side === 'host' ? "the app's runtime" : 'the host';
  return (
    `${side === 'host' ? 'this host' : "this app's runtime"} speaks ${bridgeProtocol} version ` +
    `${bridgeVersion}, ${other} version ${typeof theirs === 'number' ? theirs : '(none)'}: ` +
    `use an @svc/sdk of the same major version on both sides (${side === 'host' ? 'the app loads /_svc/sdk.js from its host' : 'load /_svc/sdk.js from the host, not a copy'})`
  );
}
