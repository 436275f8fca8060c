/**
 * Identity tokens (DESIGN.md §10): a short-lived ES256 JWT that tells a mini-app's own backend
 * which user asked, about which car, for which app. Signed with the store's current key
 * (signing-keys.ts); verified against `/.well-known/jwks.json`.
 */
import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import type { components } from '../../../generated/openapi.ts';
import type { Principal } from '../auth/principal.ts';
import { findCar } from '../cars/car-repository.ts';
import { visibleCar } from '../cars/car-visibility.ts';
import type { Clock } from '../clock.ts';
import type { ParsedDeviceId } from '../device-id.ts';
import { InvalidError } from '../errors.ts';
import { requireLiveAppFor } from '../mini-apps/published-apps.ts';
import type { Db } from '../store/db.ts';
import { identityTokenLifetimeSeconds, type SigningKeyService } from './signing-keys.ts';

export type IdentityTokenRequest = components['schemas']['IdentityTokenRequest'];
export type IdentityToken = components['schemas']['IdentityToken'];

/**
 * The tag in its canonical BCP 47 form (`en-gb` → `en-GB`), so that backends compare like with
 * like; the contract checks the shape, this the grammar (`en-GBX` has the shape, not the grammar).
 */
function canonicalLocale(locale: string): string {
  let canonical: string[] = [];
  try {
    canonical = Intl.getCanonicalLocales(locale);
  } catch {}
  const [tag] = canonical;
  if (!tag) {
    throw new InvalidError(
      'invalid_locale',
      `locale "${locale}" is no BCP 47 language tag: send one such as en-GB or de.`,
      { title: 'Invalid locale', errors: [{ path: '/body/locale', message: 'is no BCP 47 language tag' }] },
    );
  }
  return tag;
}

export function createIdentityTokenService(deps: {
  db: Db;
  clock: Clock;
  keys: SigningKeyService;
  /** The service's public base URL (the `iss`), as the request's Host picks among its own names. */
  issuer: (requestHost?: string) => string;
}) {
  const { db, clock, keys } = deps;
  return {
    /**
     * For the car's owner or an admin, for a published app whose live version lists the car's
     * brand.
     */
    async issue(
      principal: Principal,
      { deviceId }: ParsedDeviceId,
      request: IdentityTokenRequest,
      requestHost?: string,
    ): Promise<IdentityToken> {
      const locale = canonicalLocale(request.locale);
      const car = visibleCar(principal, deviceId, await findCar(db, deviceId));
      await requireLiveAppFor(db, request.app_id, car.brand);
      // The time is taken before the key is read: a key that retires after this read retires
      // after `iat`, so it stays in the JWKS until this token has expired.
      const issuedAt = Math.floor(clock().getTime() / 1000);
      const expiresAt = issuedAt + identityTokenLifetimeSeconds;
      const signer = await keys.currentSigner();
      const token = await new SignJWT({ device_id: car.device_id, brand: car.brand, locale })
        .setProtectedHeader({ alg: 'ES256', typ: 'JWT', kid: signer.kid })
        .setSubject(principal.accountId)
        .setIssuer(deps.issuer(requestHost))
        .setAudience(request.app_id)
        .setIssuedAt(issuedAt)
        .setExpirationTime(expiresAt)
        .setJti(randomUUID())
        .sign(signer.key);
      return { token, expires_at: new Date(expiresAt * 1000).toISOString() };
    },
  };
}

export type IdentityTokenService = ReturnType<typeof createIdentityTokenService>;
