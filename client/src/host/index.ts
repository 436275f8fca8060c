/**
 * `@svc/sdk/host`, the host's side of the bridge (docs/host-bridge.md): embeds a mini-app in an
 * iframe, answers its requests through the callbacks it is given (the host decides where a
 * status or a token comes from: the service, a car's own bus, the dev-server's panel), and tells
 * it when the active car changes and when that car's status does. It answers only the app's
 * frame, at the app's origin.
 */
import type { Brand } from '../../../generated/brands.ts';
import type { CarStatus, IdentityToken, Install, Location } from '../../../generated/sdk-models.ts';
import { validateDeviceId } from '../device-id.ts';
import type { BridgeMessageEvent, FrameElement } from '../runtime/message-window.ts';
import {
  asOrigin,
  type BridgeEvent,
  type BridgeMethod,
  type BridgeResponse,
  bridgeMethods,
  bridgeVersion,
  envelope,
  type HostContextData,
  HostError,
  hostOriginParameter,
  isAppId,
  isCarStatus,
  isLocale,
  isProtocolMessage,
  isRequestId,
  type ProtocolMessage,
  versionMismatchMessage,
} from '../runtime/protocol.ts';

export type { ActiveCarChange, HostErrorCode } from '../runtime/protocol.ts';
export {
  bridgeProtocol,
  bridgeVersion,
  HostError,
  hostErrorCodes,
  hostOriginParameter,
} from '../runtime/protocol.ts';

/** What a callback is asked about: always the active car, for this app and locale. */
export interface CarRequest {
  deviceId: string;
  brand: Brand;
  appId: string;
  locale: string;
}

type Answer<T> = (request: CarRequest) => T | Promise<T>;

export interface CreateHostOptions {
  /** The iframe the app runs in; createHost loads the app into it. */
  frame: FrameElement;
  /**
   * The app's entry page. Its origin is the only one answered, and must not be the host page's
   * own (an app there could reach into the host page). createHost adds `svc_host_origin`.
   */
  appUrl: string | URL;
  /** The mini-app's id (its manifest's `id`). */
  appId: string;
  /** The active car's full prefixed device id. */
  activeCarId: string;
  /** The user's BCP 47 language tag; passed on in its canonical form (`en-gb` → `en-GB`). */
  locale: string;
  /** Each answer the app may ask for; one left out answers `not_available`. Throw a HostError to answer its code. */
  identityToken?: Answer<IdentityToken>;
  status?: Answer<CarStatus>;
  location?: Answer<Location>;
  install?: Answer<Install>;
  /** How many of the app's requests may wait on the callbacks at once; 16 unless given. */
  maxPendingRequests?: number;
  /** Told when a callback fails with something other than a HostError (the app only hears `host_failed`). */
  onCallbackError?: (error: unknown, method: BridgeMethod) => void;
}

/** The host's side of one embedded app. */
export interface Host {
  /** The only origin the host answers. */
  readonly appOrigin: string;
  readonly activeCarId: string;
  /** Makes another car the active one and tells the app (`activecarchange`). */
  setActiveCar(deviceId: string): void;
  /**
   * Tells the app the active car's status as it is now (`statuschange`), whenever the car reports
   * a change (ignition, doors, online, …). A status of another car is not sent: false. Throws a
   * TypeError for something that is not a CarStatus.
   */
  statusChanged(status: CarStatus): boolean;
  /** Stops answering the app. */
  close(): void;
}

const defaultMaxPendingRequests = 16;

const carMethods = ['identityToken', 'status', 'location', 'install'] as const;
type CarMethod = (typeof carMethods)[number];

function canonicalLocale(locale: string): string {
  let canonical: string | undefined;
  try {
    [canonical] = Intl.getCanonicalLocales(locale);
  } catch {
    canonical = undefined;
  }
  if (canonical === undefined || !isLocale(locale) || !isLocale(canonical)) {
    throw new RangeError(`locale ${JSON.stringify(locale)} is not a BCP 47 language tag such as en-GB`);
  }
  return canonical;
}

export function createHost(options: CreateHostOptions): Host {
  const { frame, appId } = options;
  const hostWindow = frame.ownerDocument.defaultView;
  if (hostWindow === null) throw new TypeError('the frame must be in a document that has a window');
  if (!isAppId(appId)) throw new TypeError(`appId ${JSON.stringify(appId)} is not an app id`);
  const hostOrigin = asOrigin(hostWindow.location.origin);
  if (hostOrigin === undefined) {
    throw new TypeError(
      `the host page has no http(s) origin (${hostWindow.location.origin}): serve it over http(s)`,
    );
  }
  const appUrl = new URL(options.appUrl, frame.ownerDocument.baseURI);
  const appOrigin = asOrigin(appUrl.origin);
  if (appOrigin === undefined) throw new TypeError(`appUrl ${appUrl.href} is not an http(s) URL`);
  if (appOrigin === hostOrigin) {
    throw new TypeError(
      `the app (${appOrigin}) must be served on another origin than the host page: in the same origin it could reach into the host page`,
    );
  }
  const locale = canonicalLocale(options.locale);
  let activeCar = validateDeviceId(options.activeCarId);
  let activeCarId = options.activeCarId;
  const maxPending = options.maxPendingRequests ?? defaultMaxPendingRequests;
  let waiting = 0;
  let closed = false;

  const post = (message: BridgeResponse | BridgeEvent) => {
    // Addressed to the app's origin: if the frame went elsewhere, the browser drops it.
    frame.contentWindow?.postMessage(message, appOrigin);
  };
  const answerError = (id: string, error: HostError) => {
    post({ ...envelope(), kind: 'response', id, error: { code: error.code, message: error.message } });
  };

  const answer = async (id: string, method: BridgeMethod, params: unknown) => {
    if (method === 'connect') {
      const context: HostContextData = { appId, activeCarId, brand: activeCar.brand, locale };
      post({ ...envelope(), kind: 'response', id, result: context });
      return;
    }
    const asked = (typeof params === 'object' && params !== null ? params : {}) as { deviceId?: unknown };
    if (asked.deviceId !== activeCarId) {
      answerError(
        id,
        new HostError(
          'inactive_car',
          `${method} was asked about a car that is not the active one: the active car changed`,
        ),
      );
      return;
    }
    const callback = options[method as CarMethod] as Answer<unknown> | undefined;
    if (callback === undefined) {
      answerError(id, new HostError('not_available', `this host does not offer ${method}`));
      return;
    }
    if (waiting >= maxPending) {
      answerError(
        id,
        new HostError(
          'too_many_requests',
          `more than ${maxPending} requests wait on the host: wait for their answers`,
        ),
      );
      return;
    }
    waiting += 1;
    try {
      const result = await callback({ deviceId: activeCarId, brand: activeCar.brand, appId, locale });
      if (!closed) post({ ...envelope(), kind: 'response', id, result });
    } catch (error) {
      if (closed) return;
      if (error instanceof HostError) {
        answerError(id, error);
      } else {
        options.onCallbackError?.(error, method);
        answerError(id, new HostError('host_failed', `the host could not answer ${method}: try again later`));
      }
    } finally {
      waiting -= 1;
    }
  };

  const receive = (message: ProtocolMessage) => {
    // The host hears requests only; an id it cannot echo gets no answer.
    if (message.kind !== 'request' || !isRequestId(message.id)) return;
    const { id, method } = message;
    if (message.version !== bridgeVersion) {
      answerError(id, new HostError('version_mismatch', versionMismatchMessage('host', message.version)));
      return;
    }
    if (typeof method !== 'string' || !(bridgeMethods as readonly string[]).includes(method)) {
      answerError(
        id,
        new HostError(
          'unknown_method',
          `this host knows no method ${JSON.stringify(String(method).slice(0, 40))}: it answers ${bridgeMethods.join(', ')}`,
        ),
      );
      return;
    }
    void answer(id, method as BridgeMethod, message.params);
  };

  const onMessage = (event: BridgeMessageEvent) => {
    // Only the app's own frame, at the app's origin: another frame, or the app's frame after it
    // went to another origin, is not the app.
    if (closed || event.source === null || event.source !== frame.contentWindow || event.origin !== appOrigin)
      return;
    if (isProtocolMessage(event.data)) receive(event.data);
  };
  hostWindow.addEventListener('message', onMessage);

  appUrl.searchParams.set(hostOriginParameter, hostOrigin);
  frame.src = appUrl.href;

  return {
    appOrigin,
    get activeCarId() {
      return activeCarId;
    },
    setActiveCar(deviceId: string) {
      const parts = validateDeviceId(deviceId);
      if (deviceId === activeCarId) return;
      activeCar = parts;
      activeCarId = deviceId;
      if (!closed) {
        post({
          ...envelope(),
          kind: 'event',
          name: 'activecarchange',
          data: { activeCarId, brand: parts.brand },
        });
      }
    },
    statusChanged(status: CarStatus) {
      if (!isCarStatus(status)) {
        throw new TypeError(
          'statusChanged takes a CarStatus: deviceId and brand of a valid car, online, state (an object), lastSeen and reportedAt (times or null)',
        );
      }
      if (closed || status.deviceId !== activeCarId) return false;
      // Only the model's fields: whatever else the object holds is not the app's.
      const { deviceId, brand, online, lastSeen, state, reportedAt } = status;
      post({
        ...envelope(),
        kind: 'event',
        name: 'statuschange',
        data: { status: { deviceId, brand, online, lastSeen, state, reportedAt } },
      });
      return true;
    },
    close() {
      closed = true;
      hostWindow.removeEventListener('message', onMessage);
    },
  };
}
