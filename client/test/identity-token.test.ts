import assert from 'node:assert/strict';
import { type CryptoKey, exportSPKI, importJWK, SignJWT, UnsecuredJWT } from 'jose';
import { afterEach, describe, test, vi } from 'vitest';
import {
  createIdentityTokenVerifier,
  IdentityTokenError,
  type IdentityTokenErrorCode,
  identityTokenErrorCodes,
  verifyIdentityToken,
} from '../src/index.ts';
import {
  appId,
  deviceId,
  issuer,
  makeSigningKey,
  type SigningKey,
  serviceClaims,
  signToken,
  startJwksServer,
} from './support/identity-keys.ts';

const current = await makeSigningKey('key-2026-11');
const next = await makeSigningKey('key-2026-12');
const jwks = { keys: [current.publicJwk, next.publicJwk] };

/** The refusal verifyIdentityToken throws for `token`, checked to be an IdentityTokenError. */
async function refusal(token: string, options: Partial<Parameters<typeof verifyIdentityToken>[1]> = {}) {
  try {
    await verifyIdentityToken(token, { jwks, audience: appId, issuer, ...options } as Parameters<
      typeof verifyIdentityToken
    >[1]);
  } catch (error) {
    assert.ok(error instanceof IdentityTokenError, `not an IdentityTokenError: ${String(error)}`);
    assert.ok(identityTokenErrorCodes.includes(error.code));
    // The token is a credential until it expires: no message repeats it.
    assert.ok(!error.message.includes(token) || token === '', 'the message holds the token');
    return error;
  }
  assert.fail('the token was accepted');
}

async function assertRefused(token: string, code: IdentityTokenErrorCode, options = {}) {
  const error = await refusal(token, options);
  assert.equal(error.code, code, error.message);
  return error;
}

/** `token` with its payload replaced, the signature kept. */
function withPayload(token: string, payload: Record<string, unknown>): string {
  const [header, , signature] = token.split('.');
  return `${header}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.${signature}`;
}

afterEach(() => {
  vi.useRealTimers();
});

describe('verifyIdentityToken: a token the service signed', () => {
  test('when the token is signed by a key of the set for this app then it returns who, which car and until when', async () => {
    const claims = serviceClaims();
    const identity = await verifyIdentityToken(await signToken(current, claims), {
      jwks,
      audience: appId,
      issuer,
    });
    assert.deepEqual(identity, {
      sub: claims.sub,
      deviceId,
      brand: 'brand_a',
      locale: 'en-GB',
      appId,
      expiresAt: new Date((claims.exp as number) * 1000).toISOString(),
      tokenId: claims.jti,
    });
  });

  test('when the token is signed by the next key (published before a rotation) then it verifies too', async () => {
    const identity = await verifyIdentityToken(await signToken(next), { jwks, audience: appId });
    assert.equal(identity.deviceId, deviceId);
  });

  test('when no issuer is given then any issuer passes, and the backend of several apps lists their ids', async () => {
    const token = await signToken(current, serviceClaims({ iss: 'https://other.example.com' }));
    const identity = await verifyIdentityToken(token, { jwks, audience: ['com.example.other', appId] });
    assert.equal(identity.appId, appId);
  });

  test('when the device id is of another brand then brand and id come back as signed', async () => {
    const token = await signToken(
      current,
      serviceClaims({ device_id: 'brand_c:car-7.eu', brand: 'brand_c' }),
    );
    const identity = await verifyIdentityToken(token, { jwks, audience: appId });
    assert.equal(identity.deviceId, 'brand_c:car-7.eu');
    assert.equal(identity.brand, 'brand_c');
  });

  test('when the clocks disagree by a few seconds then a token issued "in the future" still verifies', async () => {
    const token = await signToken(current, serviceClaims({}, Date.now() + 10_000));
    await verifyIdentityToken(token, { jwks, audience: appId });
  });
});

describe('verifyIdentityToken: the signature and its key', () => {
  test('when the token is unsigned (alg "none") then it is refused as unsupported_algorithm', async () => {
    const token = new UnsecuredJWT(serviceClaims()).encode();
    const forged = `${Buffer.from(JSON.stringify({ alg: 'none', kid: current.kid })).toString('base64url')}.${token.split('.')[1]}.`;
    await assertRefused(token, 'unsupported_algorithm');
    await assertRefused(forged, 'unsupported_algorithm');
  });

  test('when the token is HS256 keyed with the public key (key confusion) then it is refused as unsupported_algorithm', async () => {
    const pem = await exportSPKI(await publicKeyOf(current));
    for (const secret of [
      new TextEncoder().encode(pem),
      new TextEncoder().encode(JSON.stringify(current.publicJwk)),
    ]) {
      const token = await new SignJWT(serviceClaims())
        .setProtectedHeader({ alg: 'HS256', kid: current.kid })
        .sign(secret);
      await assertRefused(token, 'unsupported_algorithm');
    }
  });

  test('when the token is signed with another algorithm (ES384, RS256) then it is refused as unsupported_algorithm', async () => {
    for (const alg of ['ES384', 'RS256']) {
      const other = await makeSigningKey(current.kid, alg);
      const error = await assertRefused(await signToken(other), 'unsupported_algorithm', {
        jwks: { keys: [...jwks.keys, other.publicJwk] },
      });
      assert.match(error.message, new RegExp(alg));
    }
  });

  test('when the token names a key the set does not hold then it is refused as unknown_key', async () => {
    const stranger = await makeSigningKey('key-1999-01');
    await assertRefused(await signToken(stranger), 'unknown_key');
  });

  test('when the token names no key then it is refused as unknown_key', async () => {
    const token = await new SignJWT(serviceClaims())
      .setProtectedHeader({ alg: 'ES256' })
      .sign(current.privateKey);
    await assertRefused(token, 'unknown_key');
  });

  test('when the token names a known key but was signed with another one then it is refused as invalid_signature', async () => {
    const impostor = await makeSigningKey(current.kid);
    await assertRefused(await signToken(impostor), 'invalid_signature');
  });

  test('when the payload was changed after signing (another car) then it is refused as invalid_signature', async () => {
    const claims = serviceClaims();
    const token = withPayload(await signToken(current, claims), {
      ...claims,
      device_id: 'brand_a:5YJSA1E26HF000001',
    });
    await assertRefused(token, 'invalid_signature');
  });

  test('when the token is not a JWT then it is refused as malformed_token', async () => {
    for (const token of ['', 'abc', 'a.b', 'a.b.c.d', '!!!.e30.', `${'a'.repeat(9000)}.e30.x`]) {
      await assertRefused(token, 'malformed_token');
    }
    await assertRefused(42 as unknown as string, 'malformed_token');
  });
});

describe('verifyIdentityToken: the claims', () => {
  test('when the token is for another app then it is refused as wrong_audience, naming both', async () => {
    const token = await signToken(current, serviceClaims({ aud: 'com.example.other' }));
    const error = await assertRefused(token, 'wrong_audience');
    assert.match(error.message, /com\.example\.other.*com\.example\.hello-car/);
  });

  test('when the token was issued by another service then it is refused as wrong_issuer', async () => {
    const token = await signToken(current, serviceClaims({ iss: 'https://evil.example.com' }));
    await assertRefused(token, 'wrong_issuer');
  });

  test('when the token has expired then it is refused as expired', async () => {
    const token = await signToken(current, serviceClaims({}, Date.now() - 400_000));
    await assertRefused(token, 'expired');
  });

  test('when the token was issued more than 10 minutes ago then it is refused as expired, whatever its exp', async () => {
    const iat = Math.floor(Date.now() / 1000) - 700;
    const token = await signToken(current, serviceClaims({ iat, exp: iat + 600 }));
    await assertRefused(token, 'expired');
  });

  test('when the token lives longer than 10 minutes then it is refused as invalid_claims', async () => {
    const iat = Math.floor(Date.now() / 1000);
    await assertRefused(await signToken(current, serviceClaims({ exp: iat + 3600 })), 'invalid_claims');
  });

  test('when the token is not valid yet (nbf, or iat beyond the clock tolerance) then it is refused as not_yet_valid', async () => {
    const now = Math.floor(Date.now() / 1000);
    await assertRefused(await signToken(current, serviceClaims({ nbf: now + 120 })), 'not_yet_valid');
    await assertRefused(await signToken(current, serviceClaims({}, Date.now() + 120_000)), 'not_yet_valid');
    await assertRefused(await signToken(current, serviceClaims({}, Date.now() + 10_000)), 'not_yet_valid', {
      clockToleranceSeconds: 0,
    });
  });

  test('when the device id is not a valid prefixed id then it is refused as invalid_device_id', async () => {
    for (const id of ['1HGCM82633A004352', 'brand_x:1HGCM82633A004352', 'brand_a:1hgcm82633a004352', 42]) {
      const token = await signToken(current, serviceClaims({ device_id: id }));
      await assertRefused(token, 'invalid_device_id');
    }
  });

  test('when the device id and brand disagree then it is refused as brand_mismatch', async () => {
    const token = await signToken(current, serviceClaims({ brand: 'brand_b' }));
    const error = await assertRefused(token, 'brand_mismatch');
    assert.match(error.message, /brand_a.*brand_b/);
  });

  test('when a claim the service always sets is missing or mistyped then it is refused as invalid_claims', async () => {
    for (const claim of ['sub', 'device_id', 'brand', 'locale', 'jti', 'iat', 'exp']) {
      const token = await signToken(current, serviceClaims({ [claim]: undefined }));
      const error = await assertRefused(token, 'invalid_claims');
      assert.match(error.message, new RegExp(claim));
    }
    for (const claims of [{ aud: [appId] }, { sub: 7 }, { locale: 'en GB\n' }, { brand: ['brand_a'] }]) {
      await assertRefused(await signToken(current, serviceClaims(claims)), 'invalid_claims');
    }
  });

  test('when the options forget the audience then nothing is verified: it throws a TypeError', async () => {
    const token = await signToken(current);
    for (const audience of [undefined, '', []]) {
      await assert.rejects(
        verifyIdentityToken(token, { jwks, audience } as unknown as Parameters<
          typeof verifyIdentityToken
        >[1]),
        TypeError,
      );
    }
    assert.throws(
      () => createIdentityTokenVerifier({ jwks, jwksUrl: 'https://x', audience: appId } as never),
      TypeError,
    );
  });
});

describe('verifyIdentityToken: the key set at jwksUrl', () => {
  test('when tokens are verified one after another then the key set is fetched once', async () => {
    const server = await startJwksServer([current, next]);
    try {
      for (let i = 0; i < 3; i++) {
        const identity = await verifyIdentityToken(await signToken(current), {
          jwksUrl: server.url,
          audience: appId,
          issuer,
        });
        assert.equal(identity.deviceId, deviceId);
      }
      assert.equal(server.fetches(), 1);
    } finally {
      await server.close();
    }
  });

  test('when the fetched key set is 5 minutes old (the JWKS max-age) then the next token fetches it again', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const server = await startJwksServer([current]);
    try {
      const verify = createIdentityTokenVerifier({ jwksUrl: server.url, audience: appId });
      await verify(await signToken(current));
      assert.equal(server.fetches(), 1);

      vi.setSystemTime(Date.now() + 299_000);
      await verify(await signToken(current));
      assert.equal(server.fetches(), 1, 'a set younger than 5 minutes is used as it is');

      vi.setSystemTime(Date.now() + 2_000);
      await verify(await signToken(current));
      assert.equal(server.fetches(), 2, 'the service says max-age=300: an older set is fetched again');
    } finally {
      await server.close();
    }
  });

  test('when keys rotate then a token naming the new key fetches the set again, at most once every 30 s', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const server = await startJwksServer([current]);
    try {
      const verify = createIdentityTokenVerifier({ jwksUrl: server.url, audience: appId });
      await verify(await signToken(current));
      assert.equal(server.fetches(), 1);

      // The service rotates: the set now holds a key this verifier has not seen.
      const rotated: SigningKey = await makeSigningKey('key-2027-01');
      server.serve([current, rotated]);

      vi.setSystemTime(Date.now() + 31_000);
      const identity = await verify(await signToken(rotated));
      assert.equal(identity.deviceId, deviceId);
      assert.equal(server.fetches(), 2);

      // A flood of tokens naming unknown keys costs one fetch per 30 s, not one per token.
      const stranger = await makeSigningKey('key-unknown');
      for (let i = 0; i < 5; i++) {
        const error = await verify(await signToken(stranger)).catch((caught: unknown) => caught);
        assert.ok(error instanceof IdentityTokenError);
        assert.equal(error.code, 'unknown_key');
      }
      assert.equal(server.fetches(), 2);
      vi.setSystemTime(Date.now() + 31_000);
      await verify(await signToken(stranger)).catch(() => undefined);
      assert.equal(server.fetches(), 3);
    } finally {
      await server.close();
    }
  });

  test('when the key set cannot be fetched then it is refused as jwks_unavailable, naming the URL', async () => {
    const server = await startJwksServer([current]);
    server.fail(503);
    try {
      const verify = createIdentityTokenVerifier({ jwksUrl: server.url, audience: appId });
      const error = await verify(await signToken(current)).catch((caught: unknown) => caught);
      assert.ok(error instanceof IdentityTokenError);
      assert.equal(error.code, 'jwks_unavailable');
      assert.ok(error.message.includes(server.url));
    } finally {
      await server.close();
    }
    const closed = createIdentityTokenVerifier({ jwksUrl: server.url, audience: appId });
    const error = await closed(await signToken(current)).catch((caught: unknown) => caught);
    assert.ok(error instanceof IdentityTokenError);
    assert.equal(error.code, 'jwks_unavailable');
  });

  test('when a fetch is given then the key set is fetched with it', async () => {
    const urls: string[] = [];
    const fetch = (async (input: string | URL | Request) => {
      urls.push(String(input instanceof Request ? input.url : input));
      return Response.json(jwks);
    }) as typeof globalThis.fetch;
    const identity = await verifyIdentityToken(await signToken(current), {
      jwksUrl: 'https://svc.example.com/.well-known/jwks.json',
      audience: appId,
      fetch,
    });
    assert.equal(identity.appId, appId);
    assert.deepEqual(urls, ['https://svc.example.com/.well-known/jwks.json']);
  });

  test('when jwksUrl is not an http(s) URL then it throws a TypeError', async () => {
    for (const jwksUrl of ['file:///etc/passwd', 'not a url', 42]) {
      assert.throws(
        () => createIdentityTokenVerifier({ jwksUrl, audience: appId } as never),
        (error: unknown) => error instanceof TypeError && /must be the http\(s\) URL/.test(error.message),
      );
    }
    // http is taken (a service on this machine, `npm start`), as the message says.
    createIdentityTokenVerifier({ jwksUrl: 'http://127.0.0.1:8080/.well-known/jwks.json', audience: appId });
  });
});

async function publicKeyOf(key: SigningKey) {
  return (await importJWK(key.publicJwk, 'ES256')) as CryptoKey;
}
