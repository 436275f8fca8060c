/**
 * `@svc/sdk/runtime`, what a mini-app runs: `connectHost()` talks to the page that embeds the app
 * (its host, through `@svc/sdk/host` or any host that speaks docs/host-bridge.md) and gives the
 * app its context: the active car, the user's locale, identity tokens for its backend, and the
 * car's status, location and installed apps as the SDK's v4 models.
 *
 * The browser build of this entry is served by the host, in the app's own origin, at
 * `/_svc/sdk.js`: `import { connectHost, redactDeviceId } from '/_svc/sdk.js'`.
 */
import type { Brand } from '../../../generated/brands.ts';
import type { CarStatus, IdentityToken, Install, Location } from '../../../generated/sdk-models.ts';
import type { BridgeMessageEvent, MessageWindow } from './message-window.ts';
import {
  type ActiveCarChange,
  asOrigin,
  type BridgeMethod,
  type BridgeRequest,
  bridgeVersion,
  envelope,
  type HostContextData,
  HostError,
  hostOriginParameter,
  isActiveCar,
  isAppId,
  isCarStatus,
  isHostErrorCode,
  isLocale,
  isProtocolMessage,
  isRequestId,
  type ProtocolMessage,
  versionMismatchMessage,
} from './protocol.ts';
import { changedFields } from './status-change.ts';

export type { Brand } from '../../../generated/brands.ts';
export type {
  CarStatus,
  IdentityToken,
  Install,
  InstalledApp,
  Location,
} from '../../../generated/sdk-models.ts';
export { isValidDeviceId, redactDeviceId } from '../device-id.ts';
export type { ActiveCarChange, HostErrorCode } from './protocol.ts';
export { bridgeProtocol, bridgeVersion, HostError, hostErrorCodes, hostOriginParameter } from './protocol.ts';

export interface ConnectHostOptions {
  /**
   * The host origin, or origins, this app accepts. Without it the app accepts the origin its host
   * names in the app's URL (`?svc_host_origin=…`); with it, a host at any other origin is refused.
   */
  hostOrigin?: string | readonly string[];
  /** How long to wait for each answer of the host, in milliseconds; 10 seconds unless given. */
  timeoutMs?: number;
}

/** What the active car's `statuschange` event carries. */
export interface StatusChange {
  /** The active car's status as it is now: what `status()` would answer. */
  status: CarStatus;
  /**
   * What differs from the last status the app had (from `status()` or an earlier event): `online`
   * and `state.<key>` (`state.ignition`); every field when the app had none.
   */
  changed: string[];
}

/** Each event of the context, and what its listeners are given. */
export interface HostEvents {
  activecarchange: ActiveCarChange;
  statuschange: StatusChange;
}

export type HostEventName = keyof HostEvents;

/** The app's side of the bridge: its context, and the questions it may ask its host. */
export interface HostContext {
  /** The mini-app's id, as its manifest says and identity tokens carry in `aud`. */
  readonly appId: string;
  /** The car the app runs for, as its full prefixed device id; show it only through redactDeviceId. */
  readonly activeCarId: string;
  readonly brand: Brand;
  /** The user's BCP 47 language tag (`en-GB`). */
  readonly locale: string;
  /** The origin of the host page: the only one whose messages this context reads. */
  readonly hostOrigin: string;
  /**
   * An identity token for the app's backend, for the active car: send it as
   * `Authorization: Bearer <token>`. The same token is given again while it has more than a
   * minute to live.
   */
  identityToken(): Promise<IdentityToken>;
  status(): Promise<CarStatus>;
  location(): Promise<Location>;
  install(): Promise<Install>;
  /**
   * Calls `listener` on each event; returns a function that stops it.
   *
   * - `activecarchange`: the host made another car the active one (after `activeCarId` and
   *   `brand` have changed).
   * - `statuschange`: the active car's `online` or a key of its `state` (ignition, doors, …)
   *   changed; never for another car. A host that does not send it (an older one) leaves the app
   *   with what `status()` answered.
   */
  on<Name extends HostEventName>(name: Name, listener: (change: HostEvents[Name]) => void): () => void;
  /** Stops listening to the host; calls waiting on it fail with `closed`. */
  close(): void;
}

const defaultTimeoutMs = 10_000;

/** A token is given again while it lives at least this much longer. */
const tokenReuseMarginMs = 60_000;

/** Longest message of the host's that an error repeats. */
const maxHostMessageLength = 500;

const compactJwt = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/**
 * Connects to the page that embeds this app and answers its context. Fails with a HostError:
 * `not_embedded` outside a frame, `invalid_host_origin` / `wrong_host_origin` when the host's
 * origin is not known or not accepted, `timeout` when no host answers, `version_mismatch` when
 * the host speaks another version of the bridge.
 */
export async function connectHost(options: ConnectHostOptions = {}): Promise<HostContext> {
  const window = (globalThis as { window?: MessageWindow }).window;
  if (window === undefined || window.parent === window) {
    throw new HostError(
      'not_embedded',
      'this page is not in a frame: a mini-app runs inside its host (a car, or `svc dev`), which embeds it',
    );
  }
  const hostOrigin = resolveHostOrigin(window, options.hostOrigin);
  const timeoutMs = options.timeoutMs ?? defaultTimeoutMs;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new RangeError(`timeoutMs must be a positive number of milliseconds, not ${String(timeoutMs)}`);
  }
  const bridge = openBridge(window, hostOrigin, timeoutMs);
  let context: HostContextData;
  try {
    context = checkContext(await bridge.request('connect', {}));
  } catch (error) {
    bridge.close();
    throw error;
  }
  return bridge.context(context);
}

function resolveHostOrigin(window: MessageWindow, accepted: string | readonly string[] | undefined): string {
  const named = new URL(window.location.href).searchParams.get(hostOriginParameter);
  const ancestors = window.location.ancestorOrigins;
  // Chromium and Safari say which origin embeds this page; "null" when the host hides it.
  const embedder = ancestors && ancestors.length > 0 && ancestors[0] !== 'null' ? ancestors[0] : undefined;
  let chosen: string | undefined;
  if (accepted !== undefined) {
    const list = typeof accepted === 'string' ? [accepted] : [...accepted];
    for (const origin of list) {
      if (asOrigin(origin) === undefined) {
        throw new HostError(
          'invalid_host_origin',
          `hostOrigin ${JSON.stringify(origin)} is not an origin: write it as https://host.example[:port], with no path`,
        );
      }
    }
    if (named !== null && !list.includes(named)) {
      throw new HostError(
        'wrong_host_origin',
        `the host names its origin ${JSON.stringify(named)}, which this app does not accept (hostOrigin: ${list.join(', ')})`,
      );
    }
    chosen = named ?? (embedder !== undefined && list.includes(embedder) ? embedder : list[0]);
  } else {
    if (named === null) {
      throw new HostError(
        'invalid_host_origin',
        `the app's URL does not name its host (no ${hostOriginParameter} parameter): embed the app ` +
          'with @svc/sdk/host, or pass connectHost({ hostOrigin })',
      );
    }
    chosen = asOrigin(named);
    if (chosen === undefined) {
      throw new HostError(
        'invalid_host_origin',
        `${hostOriginParameter} ${JSON.stringify(named.slice(0, 100))} is not an origin (https://host.example[:port])`,
      );
    }
  }
  if (chosen === undefined) throw new HostError('invalid_host_origin', 'no host origin to accept');
  if (embedder !== undefined && embedder !== chosen) {
    throw new HostError(
      'wrong_host_origin',
      `this app is embedded by ${embedder}, not by ${chosen} as its URL or options say`,
    );
  }
  return chosen;
}

function checkContext(result: unknown): HostContextData {
  const fields = (typeof result === 'object' && result !== null ? result : {}) as Record<string, unknown>;
  if (!isAppId(fields.appId) || !isLocale(fields.locale) || !isActiveCar(fields)) {
    throw new HostError(
      'invalid_message',
      'the host answered connect without a valid appId, activeCarId, brand and locale',
    );
  }
  return {
    appId: fields.appId,
    activeCarId: fields.activeCarId,
    brand: fields.brand,
    locale: fields.locale,
  };
}

interface Pending {
  method: BridgeMethod;
  resolve: (result: unknown) => void;
  reject: (error: HostError) => void;
  timer: ReturnType<typeof setTimeout>;
}

function randomPrefix(): string {
  const bytes = new Uint8Array(6);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
}

function openBridge(window: MessageWindow, hostOrigin: string, timeoutMs: number) {
  const pending = new Map<string, Pending>();
  // Two contexts in one window hear each other's answers: each answers only its own ids.
  const idPrefix = randomPrefix();
  let sequence = 0;
  let closed = false;
  let state: HostContextData | undefined;
  const listeners: { [Name in HostEventName]: Set<(change: HostEvents[Name]) => void> } = {
    activecarchange: new Set(),
    statuschange: new Set(),
  };
  /** The active car's last status the app was given, which the next `statuschange` is compared with. */
  let lastStatus: CarStatus | undefined;
  /** Counts `statuschange` events and car changes, so that an answer they overtook is not kept. */
  let statusEpoch = 0;
  /** The last token asked for; `expiresAt` (milliseconds) once the host has answered. */
  let token: { deviceId: string; answer: Promise<IdentityToken>; expiresAt?: number } | undefined;

  const onMessage = (event: BridgeMessageEvent) => {
    // Only the window that embeds this app, at the origin it was told; anything else is ignored.
    if (event.source !== window.parent || event.origin !== hostOrigin) return;
    if (!isProtocolMessage(event.data)) return;
    receive(event.data);
  };

  const receive = (message: ProtocolMessage) => {
    if (message.kind === 'response' && isRequestId(message.id)) {
      const waiting = pending.get(message.id);
      if (!waiting) return;
      pending.delete(message.id);
      clearTimeout(waiting.timer);
      if (message.version !== bridgeVersion) {
        waiting.reject(new HostError('version_mismatch', versionMismatchMessage('app', message.version)));
      } else if (message.error !== undefined) {
        waiting.reject(hostErrorOf(message.error));
      } else {
        waiting.resolve(message.result);
      }
      return;
    }
    if (message.kind !== 'event' || message.version !== bridgeVersion || state === undefined) return;
    if (message.name === 'activecarchange') {
      if (!isActiveCar(message.data)) return;
      const { activeCarId, brand } = message.data;
      if (activeCarId === state.activeCarId) return;
      state = { ...state, activeCarId, brand };
      token = undefined;
      lastStatus = undefined;
      statusEpoch += 1;
      emit('activecarchange', { activeCarId, brand });
    } else if (message.name === 'statuschange') {
      const status = (message.data as { status?: unknown } | null)?.status;
      // Only the active car's: a status that crossed a car change is another car's.
      if (!isCarStatus(status) || status.deviceId !== state.activeCarId) return;
      const changed = changedFields(lastStatus, status);
      lastStatus = status;
      statusEpoch += 1;
      if (changed.length > 0) emit('statuschange', { status, changed });
    }
  };

  const emit = <Name extends HostEventName>(name: Name, change: HostEvents[Name]) => {
    for (const listener of [...listeners[name]]) {
      try {
        listener(change);
      } catch (error) {
        // One listener's failure is the app's to see, and stops no other listener.
        (globalThis as { reportError?: (error: unknown) => void }).reportError?.(error);
      }
    }
  };

  window.addEventListener('message', onMessage);

  const request = (method: BridgeMethod, params: BridgeRequest['params']): Promise<unknown> => {
    if (closed)
      return Promise.reject(new HostError('closed', `the bridge is closed: ${method} was not asked`));
    sequence += 1;
    const id = `${idPrefix}-${sequence}`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(
          new HostError(
            'timeout',
            method === 'connect'
              ? `no host at ${hostOrigin} answered within ${timeoutMs} ms: is this app embedded by a host that speaks the svc host bridge?`
              : `the host did not answer ${method} within ${timeoutMs} ms`,
          ),
        );
      }, timeoutMs);
      pending.set(id, { method, resolve, reject, timer });
      const message: BridgeRequest = { ...envelope(), kind: 'request', id, method, params };
      window.parent.postMessage(message, hostOrigin);
    });
  };

  const close = () => {
    if (closed) return;
    closed = true;
    window.removeEventListener('message', onMessage);
    for (const [id, waiting] of pending) {
      clearTimeout(waiting.timer);
      pending.delete(id);
      waiting.reject(
        new HostError('closed', `the bridge was closed before the host answered ${waiting.method}`),
      );
    }
    listeners.activecarchange.clear();
    listeners.statuschange.clear();
  };

  /** Asks about the active car; the answer must be about that car. */
  const askAboutCar = async (method: 'status' | 'location' | 'install'): Promise<unknown> => {
    const deviceId = current().activeCarId;
    const result = await request(method, { deviceId });
    if (
      typeof result !== 'object' ||
      result === null ||
      (result as { deviceId?: unknown }).deviceId !== deviceId
    ) {
      throw new HostError(
        'invalid_message',
        `the host answered ${method} with something other than the active car's`,
      );
    }
    return result;
  };

  const current = (): HostContextData => {
    if (state === undefined) throw new HostError('closed', 'the bridge is not connected');
    return state;
  };

  /**
   * Whether the last token may be given again: for this car, and still on its way or living long
   * enough to be used. Judged when asked, not by a timer: a background tab's timers are throttled
   * for minutes, and a timer that had not run would hand out an expired token.
   */
  const reusable = (deviceId: string) =>
    token?.deviceId === deviceId &&
    (token.expiresAt === undefined || token.expiresAt - Date.now() > tokenReuseMarginMs);

  const identityToken = (): Promise<IdentityToken> => {
    const deviceId = current().activeCarId;
    if (token && reusable(deviceId)) return token.answer;
    const answer = request('identityToken', { deviceId }).then((result) => {
      const fields = (typeof result === 'object' && result !== null ? result : {}) as Record<string, unknown>;
      if (
        typeof fields.token !== 'string' ||
        !compactJwt.test(fields.token) ||
        typeof fields.expiresAt !== 'string' ||
        Number.isNaN(Date.parse(fields.expiresAt))
      ) {
        throw new HostError(
          'invalid_message',
          'the host answered identityToken without a token and its expiresAt',
        );
      }
      if (token?.answer === answer) token.expiresAt = Date.parse(fields.expiresAt);
      return { token: fields.token, expiresAt: fields.expiresAt };
    });
    token = { deviceId, answer };
    answer.catch(() => {
      if (token?.answer === answer) token = undefined;
    });
    return answer;
  };

  return {
    request,
    close,
    context(data: HostContextData): HostContext {
      state = data;
      return {
        appId: data.appId,
        locale: data.locale,
        hostOrigin,
        get activeCarId() {
          return current().activeCarId;
        },
        get brand() {
          return current().brand;
        },
        identityToken,
        status: async () => {
          const epoch = statusEpoch;
          const status = (await askAboutCar('status')) as CarStatus;
          // The base of the next statuschange, unless an event or a car change came since it was asked.
          if (epoch === statusEpoch && isCarStatus(status)) lastStatus = status;
          return status;
        },
        location: () => askAboutCar('location') as Promise<Location>,
        install: () => askAboutCar('install') as Promise<Install>,
        on(name, listener) {
          if (!Object.hasOwn(listeners, name))
            throw new TypeError(
              `no event ${JSON.stringify(name)}: try ${Object.keys(listeners)
                .map((known) => `'${known}'`)
                .join(' or ')}`,
            );
          if (typeof listener !== 'function') throw new TypeError('the listener must be a function');
          const set = listeners[name] as Set<typeof listener>;
          set.add(listener);
          return () => {
            set.delete(listener);
          };
        },
        close,
      };
    },
  };
}

function hostErrorOf(error: unknown): HostError {
  const fields = (typeof error === 'object' && error !== null ? error : {}) as Record<string, unknown>;
  const code = isHostErrorCode(fields.code) ? fields.code : 'host_failed';
  const message =
    typeof fields.message === 'string' && fields.message.length > 0
      ? fields.message.slice(0, maxHostMessageLength)
      : 'the host could not answer';
  return new HostError(code, message);
}
