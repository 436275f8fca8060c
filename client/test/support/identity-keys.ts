/**
 * Identity tokens as the service signs them (DESIGN §10), made here with jose: ES256 keys with a
 * `kid`, tokens with the service's claims, and a key set served over HTTP as
 * `/.well-known/jwks.json` is.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type CryptoKey, exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from 'jose';

export interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

export async function makeSigningKey(kid: string, alg = 'ES256'): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { kid, privateKey, publicJwk };
}

export const appId = 'com.example.hello-car';
export const issuer = 'https://svc.example.com';
export const deviceId = 'brand_a:1HGCM82633A004352';

/** The claims of a token signed now for 5 minutes; `overrides` replace or (as undefined) drop claims. */
export function serviceClaims(overrides: Record<string, unknown> = {}, now = Date.now()): JWTPayload {
  const iat = Math.floor(now / 1000);
  const claims: Record<string, unknown> = {
    sub: '0b9d6f4e-1c2a-4e5b-8f3d-7a6c5b4e3d21',
    device_id: deviceId,
    brand: 'brand_a',
    locale: 'en-GB',
    iss: issuer,
    aud: appId,
    iat,
    exp: iat + 300,
    jti: crypto.randomUUID(),
    ...overrides,
  };
  for (const [name, value] of Object.entries(claims)) if (value === undefined) delete claims[name];
  return claims;
}

export async function signToken(
  key: SigningKey,
  claims: JWTPayload = serviceClaims(),
  header: Record<string, unknown> = {},
): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: key.publicJwk.alg ?? 'ES256', kid: key.kid, typ: 'JWT', ...header })
    .sign(key.privateKey);
}

export interface JwksServer {
  url: string;
  /** How many times the key set was fetched. */
  fetches(): number;
  /** Replaces the keys served from now on (a rotation). */
  serve(keys: SigningKey[]): void;
  /** Answers every request with this status from now on. */
  fail(status: number): void;
  close(): Promise<void>;
}

/** `/.well-known/jwks.json` on a free port of 127.0.0.1. */
export async function startJwksServer(keys: SigningKey[]): Promise<JwksServer> {
  let served = keys;
  let failure: number | undefined;
  let count = 0;
  const server = createServer((request, response) => {
    if (request.url !== '/.well-known/jwks.json') {
      response.writeHead(404).end();
      return;
    }
    count++;
    if (failure !== undefined) {
      response.writeHead(failure, { 'content-type': 'text/plain' }).end('unavailable');
      return;
    }
    response
      .writeHead(200, { 'content-type': 'application/json', 'cache-control': 'public, max-age=300' })
      .end(JSON.stringify({ keys: served.map((key) => key.publicJwk) }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/.well-known/jwks.json`,
    fetches: () => count,
    serve: (next) => {
      served = next;
    },
    fail: (status) => {
      failure = status;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
