/**
 * The svc API as SDK v4 models: `createSvcClient({ baseUrl, token })` calls the service through the
 * raw openapi-fetch client and answers with the camelCase models generated from the contract, or
 * throws a SvcProblem. Path segments (device ids, command ids) are URL-encoded here, never by the
 * caller.
 */
import type { Brand } from '../../generated/brands.ts';
import type { components } from '../../generated/openapi.ts';
import {
  type Car,
  type CarStatus,
  type Command,
  type CommandList,
  type DeveloperIdentity,
  type IdentityToken,
  type Install,
  type Location,
  type MiniApp,
  type MiniAppVersion,
  type PackageLimits,
  type PairingCodeSent,
  type ReviewState,
  type SshKey,
  toCar,
  toCarStatus,
  toCommand,
  toCommandList,
  toDeveloperIdentity,
  toIdentityToken,
  toInstall,
  toLocation,
  toMiniApp,
  toMiniAppVersion,
  toPackageLimits,
  toPairingCodeSent,
  toSshKey,
} from '../../generated/sdk-models.ts';
import {
  type ApiClient,
  type ApiClientOptions,
  createApiClient,
  type Problem,
  problemOf,
  unexpectedResponseCode,
} from './api-client.ts';
import { DeviceIdError } from './device-id.ts';
import { describe } from './quote.ts';

export interface SvcClientOptions {
  /**
   * The service's public URL, e.g. `https://svc.example.com`. A trailing `/api/v1` (the API line
   * `npm start` prints) is dropped, so either form reaches the same service.
   */
  baseUrl: string;
  /** The access token, or a function that returns it (read when each request is sent). */
  token?: ApiClientOptions['token'];
  /** Sent as `User-Agent` where the platform allows it (Node; browsers forbid the header). */
  userAgent?: string;
  fetch?: typeof globalThis.fetch;
}

/** A refusal or failure the service answered with (RFC 9457 problem+json); `code` is stable, for programs. */
export class SvcProblem extends Error {
  override readonly name = 'SvcProblem';
  /** Stable and machine-readable: `not_found`, `brand_mismatch`, `rate_limited`, … */
  readonly code: string;
  /** The HTTP status of the answer. */
  readonly status: number;
  /** What went wrong with this request and what to do about it; also the message. */
  readonly detail: string;
  readonly title: string;
  readonly type: string;
  readonly instance: string | undefined;
  /** For `validation_failed`: each field that is wrong. */
  readonly errors: { path: string; message: string }[];

  constructor(problem: Problem) {
    super(problem.detail);
    this.code = problem.code;
    this.status = problem.status;
    this.detail = problem.detail;
    this.title = problem.title;
    this.type = problem.type;
    this.instance = problem.instance;
    this.errors = (problem.errors ?? []).map(({ path, message }) => ({ path, message }));
  }
}

/** The answer to a pairing step: a code sent for the car to show, or the car paired with the caller. */
export type PairResult =
  | { outcome: 'code_sent'; pairingCode: PairingCodeSent }
  | { outcome: 'paired'; car: Car };

type CommandRequestBody = components['schemas']['CommandRequest'];

/** What any command may say besides its name and arguments. */
export interface SendCommandOptions {
  /** How long the car may still run it; 300 unless given. */
  ttlSeconds?: number;
  /** The brand the caller believes the car is; the service refuses the command if it is not. */
  brand?: Brand;
  /** Makes a retry safe: the same key and request within 24 hours answer the first command again. */
  idempotencyKey?: string;
}

/** Each command of the contract with its own arguments, and the options. */
type WithOptions<Body> = Body extends CommandRequestBody
  ? Pick<Body, Extract<keyof Body, 'name' | 'args'>> & SendCommandOptions
  : never;

/**
 * A command, typed by the contract for each name: `{ name: 'doors.lock' }` (no `args`, or `{}`),
 * `{ name: 'app.install', args: { app_id, version? } }` (without `version`, the version the car
 * should run), `{ name: 'app.uninstall', args: { app_id } }`. Arguments are sent as given.
 */
export type SendCommandRequest = WithOptions<CommandRequestBody>;

export interface SvcClient {
  /** The openapi-fetch client underneath, typed by the contract's wire (snake_case) shapes. */
  readonly raw: ApiClient;
  /** Who the token belongs to. */
  me(): Promise<DeveloperIdentity>;
  readonly cars: {
    status(deviceId: string): Promise<CarStatus>;
    location(deviceId: string): Promise<Location>;
    install(deviceId: string): Promise<Install>;
    /** Without `code`, asks the car to show a pairing code; with the code it shows, pairs it with the caller. */
    pair(
      deviceId: string,
      request?: { code?: string; brand?: Brand; idempotencyKey?: string },
    ): Promise<PairResult>;
    unpair(deviceId: string, request?: { brand?: Brand }): Promise<Car>;
    transfer(
      deviceId: string,
      request: { toUser: string; brand?: Brand; idempotencyKey?: string },
    ): Promise<Car>;
    /** A token for a mini-app's own backend (verify it there with verifyIdentityToken). */
    identityToken(deviceId: string, request: { appId: string; locale: string }): Promise<IdentityToken>;
    readonly commands: {
      send(deviceId: string, command: SendCommandRequest): Promise<Command>;
      get(deviceId: string, commandId: string): Promise<Command>;
      /** Newest first; pass `nextCursor` back as `cursor` for the next page. */
      list(deviceId: string, page?: { cursor?: string; limit?: number }): Promise<CommandList>;
    };
  };
  readonly miniApps: {
    /** The caller's apps, most recently changed first. */
    mine(): Promise<MiniApp[]>;
    limits(): Promise<PackageLimits>;
    transition(versionId: string, request: { to: ReviewState; reason?: string }): Promise<MiniAppVersion>;
  };
  readonly keys: {
    /** The SSH keys the caller signs in with. */
    list(): Promise<SshKey[]>;
  };
}

interface Answer<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

export function createSvcClient(options: SvcClientOptions): SvcClient {
  const raw = createApiClient(options);

  return {
    raw,
    me: async () => toDeveloperIdentity(expect(await raw.GET('/api/v1/dev/me'))),
    cars: {
      status: async (deviceId) =>
        toCarStatus(expect(await raw.GET('/api/v1/cars/{device_id}/status', deviceParams(deviceId)))),
      location: async (deviceId) =>
        toLocation(expect(await raw.GET('/api/v1/cars/{device_id}/location', deviceParams(deviceId)))),
      install: async (deviceId) =>
        toInstall(expect(await raw.GET('/api/v1/cars/{device_id}/install', deviceParams(deviceId)))),
      pair: async (deviceId, request = {}) => {
        const answer = await raw.POST('/api/v1/cars/{device_id}/pair', {
          params: { ...pathOf(deviceId), ...idempotency(request.idempotencyKey) },
          body: {
            ...(request.code !== undefined ? { code: request.code } : {}),
            ...(request.brand !== undefined ? { brand: request.brand } : {}),
          },
        });
        const data = expect(answer);
        // 202 is a code on its way to the car; 200 the car, paired with the caller.
        return answer.response.status === 202
          ? { outcome: 'code_sent', pairingCode: toPairingCodeSent(data as PairingCodeSentWire) }
          : { outcome: 'paired', car: toCar(data as CarWire) };
      },
      unpair: async (deviceId, request = {}) =>
        toCar(
          expect(
            await raw.POST('/api/v1/cars/{device_id}/unpair', {
              params: pathOf(deviceId),
              body: request.brand !== undefined ? { brand: request.brand } : {},
            }),
          ),
        ),
      transfer: async (deviceId, request) =>
        toCar(
          expect(
            await raw.POST('/api/v1/cars/{device_id}/transfer', {
              params: { ...pathOf(deviceId), ...idempotency(request.idempotencyKey) },
              body: {
                to_user: request.toUser,
                ...(request.brand !== undefined ? { brand: request.brand } : {}),
              },
            }),
          ),
        ),
      identityToken: async (deviceId, request) =>
        toIdentityToken(
          expect(
            await raw.POST('/api/v1/cars/{device_id}/identity-token', {
              params: pathOf(deviceId),
              body: { app_id: request.appId, locale: request.locale },
            }),
          ),
        ),
      commands: {
        send: async (deviceId, command) =>
          toCommand(
            expect(
              await raw.POST('/api/v1/cars/{device_id}/commands', {
                params: { ...pathOf(deviceId), ...idempotency(command.idempotencyKey) },
                // The name and its arguments are one member of the contract's union, which TypeScript
                // cannot follow through the spread: they are passed on as they came.
                body: {
                  name: command.name,
                  ...(command.args !== undefined ? { args: command.args } : {}),
                  ...(command.ttlSeconds !== undefined ? { ttl_seconds: command.ttlSeconds } : {}),
                  ...(command.brand !== undefined ? { brand: command.brand } : {}),
                } as CommandRequestBody,
              }),
            ),
          ),
        get: async (deviceId, commandId) =>
          toCommand(
            expect(
              await raw.GET('/api/v1/cars/{device_id}/commands/{command_id}', {
                params: {
                  path: {
                    device_id: pathOf(deviceId).path.device_id,
                    command_id: segment(commandId, 'command id'),
                  },
                },
              }),
            ),
          ),
        list: async (deviceId, page = {}) =>
          toCommandList(
            expect(
              await raw.GET('/api/v1/cars/{device_id}/commands', {
                params: {
                  ...pathOf(deviceId),
                  query: {
                    ...(page.cursor !== undefined ? { cursor: page.cursor } : {}),
                    ...(page.limit !== undefined ? { limit: page.limit } : {}),
                  },
                },
              }),
            ),
          ),
      },
    },
    miniApps: {
      mine: async () => expect(await raw.GET('/api/v1/mini-apps/mine')).mini_apps.map(toMiniApp),
      limits: async () => toPackageLimits(expect(await raw.GET('/api/v1/mini-apps/limits'))),
      transition: async (versionId, request) =>
        toMiniAppVersion(
          expect(
            await raw.POST('/api/v1/mini-apps/versions/{version_id}/transitions', {
              params: { path: { version_id: segment(versionId, 'version id') } },
              body: { to: request.to, ...(request.reason !== undefined ? { reason: request.reason } : {}) },
            }),
          ),
        ),
    },
    keys: {
      list: async () => expect(await raw.GET('/api/v1/dev/keys')).keys.map(toSshKey),
    },
  };
}

type CarWire = Parameters<typeof toCar>[0];
type PairingCodeSentWire = Parameters<typeof toPairingCodeSent>[0];

/** The body of a successful answer, or the SvcProblem of any other. */
function expect<T>(answer: Answer<T>): T {
  const problem = problemOf(answer);
  if (problem) throw new SvcProblem(problem);
  if (answer.data !== undefined) return answer.data;
  const { response } = answer;
  const contentType = response.headers.get('content-type') ?? 'no content type';
  throw new SvcProblem({
    type: 'about:blank',
    title: response.statusText || 'Unexpected response',
    status: response.status,
    code: unexpectedResponseCode,
    detail: `the service answered ${response.status} without the body it should carry (${contentType})`,
  });
}

function deviceParams(deviceId: string) {
  return { params: pathOf(deviceId) };
}

/**
 * The device id for a path: openapi-fetch URL-encodes it (`brand_a%3A…`). An id without its brand
 * prefix is refused here, before any request: it is never a car, and a bare `..` would otherwise
 * climb out of `/cars/` once the URL is resolved.
 */
function pathOf(deviceId: string) {
  if (typeof deviceId !== 'string' || deviceId.indexOf(':') <= 0) {
    throw new DeviceIdError(
      'missing_prefix',
      typeof deviceId === 'string' ? deviceId : '',
      `device id ${describe(deviceId)} has no brand prefix: pass the full id, <brand>:<native_id>`,
    );
  }
  return { path: { device_id: deviceId } };
}

/** Any other path segment: a string that cannot be `.`, `..` or empty (encoding leaves those as they are). */
function segment(value: string, what: string): string {
  if (typeof value !== 'string' || value === '' || value === '.' || value === '..') {
    throw new TypeError(`${what} must be the id the service gave, got ${describe(value)}`);
  }
  return value;
}

function idempotency(key: string | undefined) {
  return key === undefined ? {} : { header: { 'Idempotency-Key': key } };
}
