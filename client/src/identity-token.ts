/**
 * Identity tokens, verified where a mini-app's backend receives them: ES256 JWTs the service signs
 * for one user, one car and one app (DESIGN §10), checked against the service's JWKS. Built on
 * jose's Web Crypto API, so the same code runs in Node, browsers, Deno and workers.
 */
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  customFetch,
  decodeProtectedHeader,
  errors,
  type JSONWebKeySet,
  type JWTPayload,
  type JWTVerifyGetKey,
  jwtVerify,
} from 'jose';
import type { Brand } from '../../generated/brands.ts';
import { DeviceIdError, validateDeviceId } from './device-id.ts';
import { describe, quote } from './quote.ts';

/** Why a token was refused; each is an IdentityTokenError's `code`. */
export const identityTokenErrorCodes = [
  /** Not a compact JWS, or its header or payload is not JSON. */
  'malformed_token',
  /** Signed with anything but ES256 (`none`, HS256, RS256, …). */
  'unsupported_algorithm',
  /** No `kid`, or a `kid` the key set does not hold, even after fetching it again. */
  'unknown_key',
  /** The signature does not verify under the key its `kid` names. */
  'invalid_signature',
  /** `aud` is not the app id the verifier was given. */
  'wrong_audience',
  /** `iss` is not the service the verifier was given. */
  'wrong_issuer',
  /** Past `exp`, or issued longer ago than a token lives (10 minutes). */
  'expired',
  /** Before `nbf`, or issued in the future. */
  'not_yet_valid',
  /** A claim the service always sets is missing or of the wrong type. */
  'invalid_claims',
  /** `device_id` is not a valid prefixed device id. */
  'invalid_device_id',
  /** `device_id`'s prefix and `brand` disagree. */
  'brand_mismatch',
  /** The key set could not be fetched or read. */
  'jwks_unavailable',
] as const;

export type IdentityTokenErrorCode = (typeof identityTokenErrorCodes)[number];

/** A token that was refused; `code` says why. The message never holds the token. */
export class IdentityTokenError extends Error {
  override readonly name = 'IdentityTokenError';
  readonly code: IdentityTokenErrorCode;

  constructor(code: IdentityTokenErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** Who and which car a verified token speaks for. */
export interface VerifiedIdentity {
  /** The user the token was signed for (`sub`). */
  sub: string;
  /** The car, as its full prefixed device id (`device_id`); checked by validateDeviceId. */
  deviceId: string;
  /** The car's brand; equal to the prefix of `deviceId`. */
  brand: Brand;
  /** The user's language, a BCP 47 tag such as `en-GB`. */
  locale: string;
  /** The mini-app the token is for (`aud`). */
  appId: string;
  /** When the token stops being accepted (`exp`), as an RFC 3339 string in UTC, like every time in the SDK. */
  expiresAt: string;
  /** The token's own id (`jti`), unique per token: a backend may keep it to refuse a replay. */
  tokenId: string;
}

export type IdentityTokenKeySet = JSONWebKeySet;

interface CommonVerifyOptions {
  /** Your app id, or the ids of the apps this backend serves: the token's `aud` must be one of them. */
  audience: string | readonly string[];
  /** The service's public URL; when given, the token's `iss` must equal it. */
  issuer?: string;
  /** How far the clocks of the service and this process may disagree, in seconds; 30 unless given. */
  clockToleranceSeconds?: number;
}

export type VerifyIdentityTokenOptions = CommonVerifyOptions &
  (
    | {
        /**
         * The service's `/.well-known/jwks.json`. Fetched on first use and kept for 5 minutes, as
         * its `Cache-Control: max-age=300` allows; a token naming a key the set does not hold
         * fetches it again, at most once every 30 seconds.
         */
        jwksUrl: string | URL;
        jwks?: never;
        /** The fetch to get the key set with; the platform's unless given. */
        fetch?: typeof globalThis.fetch;
      }
    | {
        /** The key set itself, for a backend that fetches and caches it on its own. */
        jwks: IdentityTokenKeySet;
        jwksUrl?: never;
        fetch?: never;
      }
  );

/** The only signature algorithm identity tokens use. */
const algorithm = 'ES256';

/** DESIGN §10: a token lives at most 10 minutes; older ones are refused whatever their `exp`. */
const maxTokenAgeSeconds = 600;

const defaultClockToleranceSeconds = 30;

/** Far above any identity token (a few hundred bytes), so hostile input stays cheap. */
const maxTokenLength = 8192;

const maxLocaleLength = 35;

const claimsTheServiceSets = ['sub', 'device_id', 'brand', 'locale', 'iss', 'aud', 'iat', 'exp', 'jti'];

/**
 * How long a fetched key set is used before it is fetched again: the service's `max-age=300`. The
 * service publishes a key 5 minutes before it signs with it (docs/adr/0022-signing-key-rotation.md),
 * so a set at most this old holds the key of every fresh token; jose's default, 10
 * minutes, would lean on the refetch for an unknown `kid` after each rotation.
 */
const keySetMaxAgeMs = 300_000;

/**
 * How long after a fetch a token naming an unknown key may fetch the set again: a flood of
 * forged `kid`s costs one fetch per 30 seconds, not one per token.
 */
const unknownKeyCooldownMs = 30_000;

/** How many remote key sets verifyIdentityToken keeps, by URL, before it drops the oldest. */
const maxCachedKeySets = 16;

const remoteKeySets = new Map<string, JWTVerifyGetKey>();
const remoteKeySetsByFetch = new WeakMap<typeof globalThis.fetch, Map<string, JWTVerifyGetKey>>();

/**
 * Checks an identity token and returns who and which car it speaks for; throws an
 * IdentityTokenError otherwise. With `jwksUrl`, the key set is fetched once per URL and process
 * and kept between calls.
 */
export async function verifyIdentityToken(
  token: string,
  options: VerifyIdentityTokenOptions,
): Promise<VerifiedIdentity> {
  const settings = readOptions(options);
  return verifyWith(token, keySetFor(options, true), settings);
}

/** A verifier with its options and key set bound once, for a backend that verifies many tokens. */
export function createIdentityTokenVerifier(
  options: VerifyIdentityTokenOptions,
): (token: string) => Promise<VerifiedIdentity> {
  const settings = readOptions(options);
  const keySet = keySetFor(options, false);
  return (token) => verifyWith(token, keySet, settings);
}

interface Settings {
  audiences: string[];
  issuer: string | undefined;
  clockTolerance: number;
  jwksSource: string;
}

/** Mistakes in the options are the caller's code, not the token: a TypeError, never a pass. */
function readOptions(options: VerifyIdentityTokenOptions): Settings {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError('verifyIdentityToken needs options: { jwksUrl or jwks, audience, issuer? }');
  }
  const audiences = typeof options.audience === 'string' ? [options.audience] : options.audience;
  // Without an audience any app's token would pass: refuse to verify rather than skip the check.
  if (
    !Array.isArray(audiences) ||
    audiences.length === 0 ||
    !audiences.every((audience) => typeof audience === 'string' && audience !== '')
  ) {
    throw new TypeError(
      `audience must be your app id (or a list of app ids), got ${describe(options.audience)}`,
    );
  }
  if (options.issuer !== undefined && (typeof options.issuer !== 'string' || options.issuer === '')) {
    throw new TypeError(`issuer must be the service's public URL, got ${describe(options.issuer)}`);
  }
  const tolerance = options.clockToleranceSeconds ?? defaultClockToleranceSeconds;
  if (typeof tolerance !== 'number' || !Number.isFinite(tolerance) || tolerance < 0) {
    throw new TypeError(`clockToleranceSeconds must be a number of seconds, 0 or more`);
  }
  return {
    audiences: [...audiences],
    issuer: options.issuer,
    clockTolerance: tolerance,
    jwksSource: options.jwksUrl !== undefined ? String(options.jwksUrl) : 'the key set given as jwks',
  };
}

function keySetFor(options: VerifyIdentityTokenOptions, cached: boolean): JWTVerifyGetKey {
  if (options.jwksUrl !== undefined && options.jwks !== undefined) {
    throw new TypeError('give either jwksUrl or jwks, not both');
  }
  if (options.jwks !== undefined) {
    try {
      return createLocalJWKSet(options.jwks);
    } catch (cause) {
      throw new TypeError('jwks must be a JSON Web Key Set: { keys: [...] }', { cause });
    }
  }
  const url = jwksUrlOf(options.jwksUrl);
  const make = () =>
    createRemoteJWKSet(url, {
      cacheMaxAge: keySetMaxAgeMs,
      cooldownDuration: unknownKeyCooldownMs,
      ...(options.fetch ? { [customFetch]: options.fetch } : {}),
    });
  if (!cached) return make();
  const sets = options.fetch ? setsForFetch(options.fetch) : remoteKeySets;
  let keySet = sets.get(url.href);
  if (!keySet) {
    keySet = make();
    sets.set(url.href, keySet);
    for (const href of sets.keys()) {
      if (sets.size <= maxCachedKeySets) break;
      sets.delete(href);
    }
  }
  return keySet;
}

function setsForFetch(fetch: typeof globalThis.fetch): Map<string, JWTVerifyGetKey> {
  let sets = remoteKeySetsByFetch.get(fetch);
  if (!sets) {
    sets = new Map();
    remoteKeySetsByFetch.set(fetch, sets);
  }
  return sets;
}

function jwksUrlOf(value: unknown): URL {
  let url: URL | undefined;
  try {
    url = value instanceof URL ? new URL(value.href) : typeof value === 'string' ? new URL(value) : undefined;
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) {
    throw new TypeError(
      `jwksUrl must be the http(s) URL of the service's /.well-known/jwks.json, got ${describe(String(value))}`,
    );
  }
  return url;
}

async function verifyWith(
  token: string,
  keySet: JWTVerifyGetKey,
  settings: Settings,
): Promise<VerifiedIdentity> {
  checkHeader(token);
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, keySet, {
      algorithms: [algorithm],
      audience: settings.audiences,
      ...(settings.issuer !== undefined ? { issuer: settings.issuer } : {}),
      clockTolerance: settings.clockTolerance,
      maxTokenAge: maxTokenAgeSeconds,
      requiredClaims: claimsTheServiceSets,
    }));
  } catch (error) {
    throw refusal(error, settings);
  }
  return identityOf(payload);
}

/** The header alone says whether the token can be ours; checked before any key is looked for. */
function checkHeader(token: unknown): void {
  if (typeof token !== 'string' || token === '') {
    throw new IdentityTokenError(
      'malformed_token',
      `identity token must be a string, got ${describe(token)}`,
    );
  }
  if (token.length > maxTokenLength || token.split('.').length !== 3) {
    throw new IdentityTokenError(
      'malformed_token',
      'identity token is not a JWT (three base64url parts separated by "."): pass the token exactly as the host gave it',
    );
  }
  let header: ReturnType<typeof decodeProtectedHeader>;
  try {
    header = decodeProtectedHeader(token);
  } catch (cause) {
    throw new IdentityTokenError(
      'malformed_token',
      'identity token has a header that is not base64url JSON',
      {
        cause,
      },
    );
  }
  if (header.alg !== algorithm) {
    throw new IdentityTokenError(
      'unsupported_algorithm',
      `identity token is signed with ${describe(header.alg)}; identity tokens are signed with ES256 only`,
    );
  }
  if (typeof header.kid !== 'string' || header.kid === '') {
    throw new IdentityTokenError(
      'unknown_key',
      'identity token names no key (kid); the service names the key of every token it signs',
    );
  }
}

function refusal(error: unknown, settings: Settings): IdentityTokenError {
  const cause = { cause: error };
  if (error instanceof errors.JWKSNoMatchingKey) {
    return new IdentityTokenError(
      'unknown_key',
      `identity token names a key that ${settings.jwksSource} does not hold: ` +
        'check that jwksUrl is the /.well-known/jwks.json of the service that signed it',
      cause,
    );
  }
  if (error instanceof errors.JWSSignatureVerificationFailed) {
    return new IdentityTokenError(
      'invalid_signature',
      'identity token signature does not verify under the key it names',
      cause,
    );
  }
  if (error instanceof errors.JOSEAlgNotAllowed) {
    return new IdentityTokenError(
      'unsupported_algorithm',
      'identity tokens are signed with ES256 only',
      cause,
    );
  }
  if (error instanceof errors.JWTExpired) {
    return new IdentityTokenError(
      'expired',
      'identity token has expired: ask the host for a new one (ctx.identityToken()) for each call',
      cause,
    );
  }
  if (error instanceof errors.JWTClaimValidationFailed) return claimRefusal(error, settings);
  if (error instanceof errors.JWSInvalid || error instanceof errors.JWTInvalid) {
    return new IdentityTokenError('malformed_token', `identity token is malformed: ${error.message}`, cause);
  }
  if (
    error instanceof errors.JWKSTimeout ||
    error instanceof errors.JWKSInvalid ||
    error instanceof errors.JWKSMultipleMatchingKeys ||
    error instanceof errors.JOSEError ||
    error instanceof TypeError
  ) {
    return new IdentityTokenError(
      'jwks_unavailable',
      `could not read the keys from ${settings.jwksSource}: ${messageOf(error)}`,
      cause,
    );
  }
  return new IdentityTokenError(
    'jwks_unavailable',
    `could not verify the identity token: ${messageOf(error)}`,
    cause,
  );
}

function claimRefusal(error: InstanceType<typeof errors.JWTClaimValidationFailed>, settings: Settings) {
  const cause = { cause: error };
  const { claim, reason, payload } = error;
  if (reason === 'missing') {
    return new IdentityTokenError('invalid_claims', `identity token has no "${claim}" claim`, cause);
  }
  if (claim === 'aud' && reason === 'check_failed') {
    return new IdentityTokenError(
      'wrong_audience',
      `identity token is for app ${describe(payload.aud)}, not ${settings.audiences.map(quote).join(' or ')}: ` +
        'a token is good for the one app it was signed for',
      cause,
    );
  }
  if (claim === 'iss' && reason === 'check_failed') {
    return new IdentityTokenError(
      'wrong_issuer',
      `identity token was issued by ${describe(payload.iss)}, not ${quote(settings.issuer ?? '')}`,
      cause,
    );
  }
  if ((claim === 'nbf' || claim === 'iat') && reason === 'check_failed') {
    return new IdentityTokenError(
      'not_yet_valid',
      `identity token is not valid yet (its "${claim}" is in the future): check this machine's clock`,
      cause,
    );
  }
  return new IdentityTokenError('invalid_claims', `identity token has an invalid "${claim}" claim`, cause);
}

function identityOf(payload: JWTPayload): VerifiedIdentity {
  const { sub, aud, exp, jti } = payload;
  const deviceId = payload.device_id;
  const brand = payload.brand;
  const locale = payload.locale;
  if (typeof sub !== 'string' || sub === '') throw invalidClaim('sub', 'a non-empty string');
  // The service signs each token for one app; a list of audiences is not a token it made.
  if (typeof aud !== 'string') throw invalidClaim('aud', 'one app id');
  if (typeof jti !== 'string' || jti === '') throw invalidClaim('jti', 'a non-empty string');
  // jwtVerify checked both are numbers; a token that would outlive its 10 minutes is not one the service signs.
  if ((exp as number) - (payload.iat as number) > maxTokenAgeSeconds) {
    throw new IdentityTokenError('invalid_claims', 'identity token lives longer than 10 minutes (exp - iat)');
  }
  if (typeof brand !== 'string') throw invalidClaim('brand', 'a brand');
  if (
    typeof locale !== 'string' ||
    locale === '' ||
    locale.length > maxLocaleLength ||
    !/^[A-Za-z0-9-]+$/.test(locale)
  ) {
    throw invalidClaim('locale', 'a BCP 47 language tag');
  }
  let parts: ReturnType<typeof validateDeviceId>;
  try {
    parts = validateDeviceId(deviceId as string, { brand });
  } catch (error) {
    if (!(error instanceof DeviceIdError)) throw error;
    throw new IdentityTokenError(
      error.code === 'brand_mismatch' ? 'brand_mismatch' : 'invalid_device_id',
      `identity token has a device_id the service would not sign: ${error.message}`,
      { cause: error },
    );
  }
  return {
    sub,
    deviceId: deviceId as string,
    brand: parts.brand,
    locale,
    appId: aud,
    expiresAt: new Date((exp as number) * 1000).toISOString(),
    tokenId: jti,
  };
}

function invalidClaim(claim: string, expected: string): IdentityTokenError {
  return new IdentityTokenError('invalid_claims', `identity token's "${claim}" claim is not ${expected}`);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
