/**
 * ADR 0050: `svc` sends the credential only on the routes its table lists, and makes no other
 * request. Read from the CLI's source, so that a new call fails here until the record lists it.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, test } from 'vitest';

const source = join(import.meta.dirname, '../src');

/** docs/adr/0050-svc-network-calls.md, by route: the calls made with the credential. */
const withCredential = [
  'GET /api/v1/dev/me',
  'GET /api/v1/mini-apps/limits',
  'POST /api/v1/mini-apps/upload-url',
  'POST /api/v1/mini-apps/submit',
  'GET /api/v1/mini-apps/mine',
  'GET /api/v1/dev/keys',
  'POST /api/v1/dev/keys',
  'DELETE /api/v1/dev/keys/{key_id}',
  'POST /api/v1/mini-apps/versions/{version_id}/transitions',
  'GET /api/v1/mini-apps/{app_id}/rollout',
  'POST /api/v1/mini-apps/{app_id}/rollout/moves',
];

/** `svc login` before it has a token: the public key, then the signature. */
const signIn = ['POST /api/v1/auth/challenges', 'POST /api/v1/auth/tokens'];

/** The files that may open a connection, and why none of them carries the credential elsewhere. */
const connecting: Record<string, string> = {
  'session.ts': 'the one typed client of the service, with the credential',
  'publish/upload.ts': 'the PUT to the presigned URL, without an authorization header',
  'ssh-agent.ts': "the ssh-agent's local socket",
  'dev/dev-server.ts': "svc dev's own server on 127.0.0.1",
  'dev/assets/panel.js': "svc dev's panel, asking its own dev-server",
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.(ts|js)$/.test(entry.name) ? [path] : [];
  });
}

/** The file's code lines, without its comments (which name `fetch()` as apps use it). */
function code(path: string): string {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => !/^\s*(\/\/|\/?\*)/.test(line))
    .join('\n');
}

describe('the network calls of svc (ADR 0050)', () => {
  const files = sourceFiles(source).map((path) => ({ name: relative(source, path), text: code(path) }));

  test('when the source is read then every call of the typed client is on a route the record lists', () => {
    const calls = new Set(
      files.flatMap(({ text }) =>
        [...text.matchAll(/client\.(GET|POST|PUT|PATCH|DELETE)\(\s*'([^']+)'/g)].map(
          ([, method, path]) => `${method} ${path}`,
        ),
      ),
    );
    assert.deepEqual([...calls].sort(), [...withCredential, ...signIn].sort());
  });

  test('when the source is read then only the files the record names open connections', () => {
    const opening = files
      .filter(({ text }) =>
        /from 'node:(http|https|net|tls|dgram|http2)'|createApiClient\(|(?<![`\w.])fetch\(|new WebSocket\(/.test(
          text,
        ),
      )
      .map(({ name }) => name)
      .sort();
    assert.deepEqual(opening, Object.keys(connecting).sort());
  });
});
