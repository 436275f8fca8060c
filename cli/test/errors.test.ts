import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { fingerprintOf, makeKey, sshKeyRecord } from '../../server/test/support/ssh.ts';
import { runSvc } from './support/run-svc.ts';
import { svc, userEnv } from './support/svc.ts';

// A stand-in for the service that answers each request with the reply the test sets, so that
// the CLI's handling of every kind of answer can be shown; the real service is in e2e.test.ts.
// The cases run inside the test process (`runSvc`); a few run the built binary (`svc`), to show
// that its exit codes 0, 2 and 4 reach the shell.
interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

describe('svc errors a person understands', () => {
  const home = mkdtempSync(join(tmpdir(), 'svc-home-'));
  let server: Server;
  let url = '';
  let reply: Reply = { status: 200, body: {} };
  const seen: IncomingHttpHeaders[] = [];
  const paths: string[] = [];
  const me = {
    account: {
      id: '0b9d6f4e-1c2a-4e5b-8f3d-7a6c5b4e3d21',
      email: 'ada@example.com',
      name: 'Ada',
      roles: ['developer'],
      created_at: '2026-11-21T09:00:00Z',
    },
    token: { source: 'web_session', expires_at: '2026-11-21T11:00:00Z' },
  };
  const problem = (status: number, code: string, detail: string): Reply => ({
    status,
    body: { type: `/problems/${code}`, title: code, status, detail, code },
  });

  beforeAll(async () => {
    mkdirSync(join(home, '.ssh'), { mode: 0o700 });
    server = createServer((req, res) => {
      seen.push(req.headers);
      paths.push(`${req.method} ${req.url}`);
      res.writeHead(reply.status, {
        'content-type': reply.status >= 400 ? 'application/problem+json' : 'application/json',
        ...reply.headers,
      });
      res.end(JSON.stringify(reply.body));
    });
    server.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(() => {
    server.close();
    rmSync(home, { recursive: true, force: true });
  });

  /** A token stored as `svc login` leaves it where there is no credential store. */
  const storeToken = (apiUrl: string) => {
    mkdirSync(join(home, '.config', 'svc'), { recursive: true, mode: 0o700 });
    const credential = {
      access_token: 'svc_stored_token_0000000000000000',
      expires_at: '2099-01-01T00:00:00Z',
      api_url: apiUrl,
    };
    writeFileSync(join(home, '.config', 'svc', 'sdk.json'), JSON.stringify(credential), { mode: 0o600 });
  };

  const env = (extra: Record<string, string> = {}) =>
    userEnv(home, { SVC_API_URL: url, SVC_TOKEN: 'svc_test_token_00000000000000', ...extra });

  test('when the key file is missing then the message names the path and how to make a key', async () => {
    const run = await runSvc(['login', '--key', join(home, '.ssh', 'nothing_here')], env());
    assert.equal(run.code, 1);
    assert.match(run.stderr, /no SSH key at .*nothing_here/);
    assert.match(run.stderr, /ssh-keygen -t ed25519/);
  });

  test('when the key is not ed25519 then it says so and how to make one', async () => {
    const rsa = makeKey(join(home, '.ssh'), 'id_rsa', { type: 'rsa' });
    const run = await runSvc(['login', '--key', rsa.path], env());
    assert.equal(run.code, 1);
    assert.equal(
      run.stderr,
      `svc: ${rsa.path} is an ssh-rsa key, and svc signs in with ed25519 keys only: make one with ssh-keygen -t ed25519, and pass it with --key.\n`,
      'said once, in one sentence',
    );
  });

  test('when --key names a folder or nothing then it says what --key wants, with exit 2', async () => {
    const folder = await runSvc(['login', '--key', join(home, '.ssh')], env());
    assert.equal(folder.code, 2, folder.stderr);
    assert.match(
      folder.stderr,
      /\.ssh is a folder: pass the private key file in it, such as --key .*\.ssh\/id_ed25519/,
    );
    assert.doesNotMatch(folder.stderr, /EISDIR/);
    const empty = await runSvc(['login', '--key', ''], env());
    assert.equal(empty.code, 2, empty.stderr);
    assert.match(empty.stderr, /--key needs the path of a private key/);
  });

  test('when ssh-agent is running but the .pub beside a protected key is missing then it says the .pub is what is missing', async () => {
    const locked = makeKey(join(home, '.ssh'), 'agent_locked', { passphrase: 'secret words' });
    rmSync(`${locked.path}.pub`);
    const run = await runSvc(
      ['login', '--key', locked.path],
      env({ SSH_AUTH_SOCK: join(home, 'agent.sock') }),
    );
    assert.equal(run.code, 1);
    assert.match(
      run.stderr,
      /put its public key beside it \(ssh-keygen -y -f .*agent_locked > .*agent_locked\.pub\)/,
    );
    assert.doesNotMatch(run.stderr, /load the key into ssh-agent/);
  });

  test('when the key has a passphrase and there is no terminal and no --passphrase then it says so', async () => {
    const locked = makeKey(join(home, '.ssh'), 'locked', { passphrase: 'secret words' });
    const run = await runSvc(['login', '--key', locked.path], env());
    assert.equal(run.code, 1);
    assert.match(run.stderr, /protected by a passphrase and there is no terminal/);
    const wrong = await runSvc(['login', '--key', locked.path, '--passphrase', 'nope'], env());
    assert.match(wrong.stderr, /passphrase for .*locked is not right/);
    const empty = await runSvc(['login', '--key', locked.path, '--passphrase', ''], env());
    assert.match(
      empty.stderr,
      /locked is protected by a passphrase, and an empty one was given: type its passphrase/,
    );
    assert.doesNotMatch(empty.stderr, /no terminal/);
  });

  test('when the challenge is for another service, key or namespace then svc refuses to sign it', async () => {
    const key = makeKey(join(home, '.ssh'), 'challenged');
    const fingerprint = fingerprintOf(`${key.path}.pub`);
    const challenge = (audience: string, keyFingerprint: string, namespace = 'svc-login') => ({
      status: 201,
      body: {
        challenge_id: '5f0c7c1e-8d7a-4c3b-9f55-2b1e0f6a9d10',
        namespace,
        message: [
          namespace,
          'challenge: 5f0c7c1e-8d7a-4c3b-9f55-2b1e0f6a9d10',
          'nonce: bm9uY2U',
          `audience: ${audience}`,
          `fingerprint: ${keyFingerprint}`,
          'expires: 2026-11-21T10:02:00.000Z',
        ].join('\n'),
        expires_at: '2026-11-21T10:02:00.000Z',
      },
    });
    for (const [bad, expected] of [
      [
        challenge('https://evil.example.com', String(fingerprint)),
        /it is for https:\/\/evil\.example\.com, not http.* sign in with --api-url https:\/\/evil\.example\.com \(or SVC_API_URL\); if you run the service .* set its SVC_PUBLIC_URL to http/,
      ],
      [challenge(url, 'SHA256:someoneelse'), /it names key SHA256:someoneelse/],
      [challenge(url, String(fingerprint), 'file'), /namespace is not svc-login/],
    ] as const) {
      reply = bad;
      paths.length = 0;
      const run = await runSvc(['login', '--key', key.path], env());
      assert.equal(run.code, 1, run.stderr);
      assert.match(run.stderr, /refusing to sign the challenge/);
      assert.match(run.stderr, expected);
      assert.deepEqual(paths, ['POST /api/v1/auth/challenges'], 'nothing was signed and sent');
    }
  });

  test('when the service cannot be reached then the message names the URL', async () => {
    const run = await runSvc(['whoami'], env({ SVC_API_URL: 'http://127.0.0.1:9' }));
    assert.equal(run.code, 1);
    assert.match(run.stderr, /cannot reach the svc service at http:\/\/127\.0\.0\.1:9/);
  });

  test('when the token is refused (401) then it says what to do about that token, exit 4', async () => {
    reply = problem(401, 'unauthorized', 'Your session has expired or is not valid.');
    const fromEnv = await runSvc(['whoami'], env());
    assert.equal(fromEnv.code, 4);
    assert.match(fromEnv.stderr, /the token in SVC_TOKEN is not valid or has expired/);
    assert.equal(fromEnv.stdout, '');

    storeToken(url);
    const stored = await runSvc(['whoami'], userEnv(home, { SVC_API_URL: url }));
    assert.equal(stored.code, 4);
    assert.match(stored.stderr, /session has expired or is not valid: run `svc login`/);
    rmSync(join(home, '.config'), { recursive: true, force: true });
  });

  test('when the stored token is for another service then it is not sent there, and svc says so', async () => {
    storeToken('http://127.0.0.1:18099');
    const before = seen.length;
    const run = await runSvc(['whoami', '--api-url', url], userEnv(home));
    assert.equal(run.code, 4);
    assert.match(
      run.stderr,
      new RegExp(`signed in to http://127\\.0\\.0\\.1:18099, not ${url.replaceAll('.', '\\.')}`),
    );
    assert.equal(seen.length, before, 'no request carried the token elsewhere');
    rmSync(join(home, '.config'), { recursive: true, force: true });
  });

  test('when --api-url is the printed API address then /api/v1 is dropped, and a bad URL is a usage error', async () => {
    reply = { status: 200, body: me };
    const run = await runSvc(['whoami', '--api-url', `${url}/api/v1`], env());
    assert.equal(run.code, 0, run.stderr);
    assert.equal((await runSvc(['whoami', '--api-url', 'htp://x'], env())).code, 2);
  });

  test('when a signed-in developer logs out then svc makes no network call and removes the local token', async () => {
    storeToken(url);
    const before = seen.length;
    const run = await runSvc(['logout'], userEnv(home, { SVC_API_URL: url }));
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, 'Signed out: the local token is removed.\n');
    assert.equal(seen.length, before, 'logout sent no request to the service');
    assert.equal(existsSync(join(home, '.config', 'svc', 'sdk.json')), false);
    rmSync(join(home, '.config'), { recursive: true, force: true });
  });

  test('when there is no token at all then exit 4 before any request', async () => {
    const before = seen.length;
    const run = await svc(['keys', 'list'], userEnv(home, { SVC_API_URL: url }));
    assert.equal(run.code, 4);
    assert.match(run.stderr, /not signed in: run `svc login`/);
    assert.equal(seen.length, before);
  });

  test('when the tool is too old (426) then it says to run svc upgrade', async () => {
    reply = problem(426, 'upgrade_required', 'svc 5.5.0 is too old for this service: run `svc upgrade`.');
    const run = await runSvc(['keys', 'list'], env());
    assert.equal(run.code, 1);
    assert.match(run.stderr, /svc upgrade/);
  });

  test('when there were too many attempts (429) then it says when to retry', async () => {
    reply = {
      ...problem(429, 'rate_limited', 'Too many failed sign-in attempts.'),
      headers: { 'retry-after': '17' },
    };
    const run = await runSvc(['whoami'], env());
    assert.equal(run.code, 1);
    assert.match(run.stderr, /try again in 17 seconds/);
  });

  test('when something that is not the service answers (a proxy page) then only its status is told', async () => {
    reply = { status: 502, body: '<html>Bad Gateway</html>', headers: { 'content-type': 'text/html' } };
    const run = await runSvc(['keys', 'list'], env());
    assert.equal(run.code, 1);
    assert.match(run.stderr, /the service answered HTTP 502/);
    assert.doesNotMatch(run.stderr, /not a problem|baseUrl/);

    reply = { status: 426, body: '<html>Upgrade Required</html>', headers: { 'content-type': 'text/html' } };
    const old = await runSvc(['keys', 'list'], env());
    assert.match(old.stderr, /this svc is too old for the service: run `svc upgrade`/);
  });

  test('when any request is sent then it names the tool and its version', async () => {
    reply = { status: 200, body: me };
    await runSvc(['whoami'], env());
    assert.equal(seen.at(-1)?.['user-agent'], 'svc-cli/5.6.0');
    assert.equal(seen.at(-1)?.authorization, 'Bearer svc_test_token_00000000000000');
  });

  test('when --json is given then stdout is one JSON document and nothing else', async () => {
    reply = { status: 200, body: me };
    const run = await runSvc(['whoami', '--json'], env());
    assert.equal(run.code, 0, run.stderr);
    const document = JSON.parse(run.stdout);
    assert.equal(document.account.email, 'ada@example.com');
    assert.equal(document.token_source, 'SVC_TOKEN');
    assert.equal(run.stdout.trim().split('\n').length, 1);

    reply = { status: 200, body: { keys: [] } };
    assert.deepEqual(JSON.parse((await runSvc(['keys', 'list', '--json'], env())).stdout), { keys: [] });
    reply = { status: 200, body: { mini_apps: [] } };
    assert.deepEqual(JSON.parse((await runSvc(['status', '--json'], env())).stdout), { mini_apps: [] });
  });

  test('when the developer has no apps then status says how to publish one', async () => {
    reply = { status: 200, body: { mini_apps: [] } };
    const run = await runSvc(['status'], env());
    assert.equal(run.code, 0);
    assert.match(run.stdout, /no mini-apps yet: publish one with `svc publish`/);
  });

  test('when a version was rejected then status shows the reason beside its state', async () => {
    const version = {
      id: '7d3f1a2b-4c5d-4e6f-8a9b-0c1d2e3f4a5b',
      app_id: 'com.example.hello-car',
      version: '1.1.0',
      review_state: 'rejected',
      reason: 'Calls an origin its manifest does not declare.',
      manifest: {
        id: 'com.example.hello-car',
        name: 'Hello Car',
        version: '1.1.0',
        entry: 'index.html',
        network: [],
      },
      package: { size: 1, sha256: 'a'.repeat(64) },
      submitted_at: '2026-11-21T10:00:00Z',
      updated_at: '2026-11-21T11:00:00Z',
    };
    const app = {
      id: 'com.example.hello-car',
      name: 'Hello Car',
      owner_id: '0b9d6f4e-1c2a-4e5b-8f3d-7a6c5b4e3d21',
      latest_version: version,
      live_version: '1.0.0',
      versions: [version],
      created_at: '2026-11-20T10:00:00Z',
      updated_at: '2026-11-21T11:00:00Z',
    };
    reply = { status: 200, body: { mini_apps: [app] } };
    const run = await runSvc(['status'], env());
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^APP\s+NAME\s+LATEST\s+REVIEW\s+LIVE\s+CHANGED$/m);
    assert.match(
      run.stdout,
      /com\.example\.hello-car\s+Hello Car\s+1\.1\.0\s+rejected \(Calls an origin its manifest does not declare\.\)\s+1\.0\.0\s+2026-11-21T11:00:00Z/,
    );
  });

  test('when a key id or a folder is mistyped then svc says what it expected, before any request', async () => {
    const before = seen.length;
    const id = await runSvc(['keys', 'remove', '1234'], env());
    assert.equal(id.code, 2);
    assert.match(id.stderr, /"1234" is not a key id: .*svc keys list/);
    const folder = await runSvc(['publish', join(home, 'no-such-app')], env());
    assert.equal(folder.code, 1);
    assert.match(folder.stderr, /no-such-app is not there: pass the folder that holds manifest\.json/);
    assert.equal(seen.length, before);
  });

  test('when the last key is removed without --yes and no terminal then exit 2, nothing is removed, and --yes is named', async () => {
    const id = '3c1e2d4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f';
    reply = { status: 200, body: { keys: [sshKeyRecord(id)] } };
    const run = await runSvc(['keys', 'remove', id], env());
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, /is your last key: without it `svc login` cannot work .* Run again with --yes/);
    assert.ok(!paths.includes(`DELETE /api/v1/dev/keys/${id}`), 'nothing was removed');
  });

  test('when the last key is removed with --yes then it is gone, and svc says how to sign in again', async () => {
    const id = '3c1e2d4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f';
    const key = sshKeyRecord(id);
    reply = { status: 200, body: { keys: [key] } };
    const run = await runSvc(['keys', 'remove', id, '--yes'], env());
    assert.equal(run.code, 0, run.stderr);
    assert.match(
      run.stderr,
      /That was your last key\. To sign in again, add a public key in the service's web console \(http:\/\/127\.0\.0\.1:\d+\/console\/keys\), then run `svc login`/,
    );
    assert.ok(paths.includes(`DELETE /api/v1/dev/keys/${id}`));
  });

  test('when a subcommand is left out then svc lists the keys commands, for `svc keys` and `svc keys --help`', async () => {
    for (const args of [['keys'], ['keys', '--help']]) {
      const run = await runSvc(args, env());
      assert.equal(run.code, 0, run.stderr);
      assert.doesNotMatch(run.stdout + run.stderr, /Command not found/);
      for (const sub of ['list', 'add', 'remove']) assert.match(run.stdout, new RegExp(`svc keys ${sub}`));
    }
  });

  test('when an option is mistyped then svc names the command once and the option meant', async () => {
    const run = await runSvc(['publish', '--dryrun'], env());
    assert.equal(run.code, 2);
    assert.equal(
      run.stderr,
      'svc: svc publish has no option --dryrun: did you mean --dry-run? Run `svc publish --help` to see its options.\n',
    );
    const withFolder = await runSvc(['dev', 'examples/hello-car', '--prot', '5171'], env());
    assert.equal(withFolder.code, 2);
    assert.equal(
      withFolder.stderr,
      'svc: svc dev has no option --prot: did you mean --port? Run `svc dev --help` to see its options.\n',
    );
    const twoFolders = await runSvc(['publish', 'a', 'b'], env());
    assert.equal(twoFolders.code, 2);
    assert.match(
      twoFolders.stderr,
      /^svc: svc publish did not understand "a b": it takes one folder at most\. Run `svc publish --help`/,
    );
    const anywhere = await runSvc(['--jsn'], env());
    assert.equal(anywhere.code, 2);
    assert.equal(anywhere.stderr.split('\n').filter(Boolean).length, 1, anywhere.stderr);
  });

  test('when a subcommand is mistyped, an argument is missing or one too many then svc says so with the command', async () => {
    const mistyped = await runSvc(['keys', 'lst'], env());
    assert.equal(mistyped.code, 2);
    assert.equal(
      mistyped.stderr,
      'svc: svc keys has no command "lst": did you mean svc keys list? Run `svc keys` to see its commands.\n',
    );
    const missing = await runSvc(['keys', 'remove'], env());
    assert.equal(missing.code, 2);
    assert.match(
      missing.stderr,
      /^svc: svc keys remove is missing an argument\.\n\$ svc keys remove .*<id>\n/,
    );
    const extra = await runSvc(['whoami', 'please'], env());
    assert.equal(extra.code, 2);
    assert.equal(
      extra.stderr,
      'svc: svc whoami takes no argument "please". Run `svc whoami --help` to see what it takes.\n',
    );
    for (const run of [mistyped, missing, extra]) assert.doesNotMatch(run.stderr, /Unknown Syntax Error/);
  });

  test("when a command's help is shown then options show what value they take, never #0", async () => {
    const help = await runSvc(['login', '--help'], env());
    assert.match(help.stdout, /--api-url <url> +The svc service/);
    assert.match(help.stdout, /--key <path> +Private key/);
    assert.doesNotMatch(help.stdout, /#0/);
    const usage = await runSvc(['keys', 'add'], env());
    assert.match(usage.stderr, /\[--title <title>\]/);
    assert.doesNotMatch(usage.stderr, /#0/);
  });

  test('when svc upgrade is asked for help then it offers no --api-url: it asks npm, never the service', async () => {
    const help = await runSvc(['upgrade', '--help'], env());
    assert.equal(help.code, 0);
    assert.doesNotMatch(help.stdout, /--api-url/);
    const given = await runSvc(['upgrade', '--api-url', 'http://127.0.0.1:9'], env());
    assert.equal(given.code, 2);
    assert.match(given.stderr, /svc upgrade has no option --api-url/);
  });

  test('when a dry run is not signed in then it checks the default limits, says so, and refuses too many files or a bomb', async () => {
    const app = join(home, 'limits-app');
    mkdirSync(join(app, 'many'), { recursive: true });
    const manifest = {
      id: 'com.example.limits',
      name: 'Limits',
      version: '1.0.0',
      entry: 'index.html',
      network: [],
    };
    writeFileSync(join(app, 'manifest.json'), JSON.stringify(manifest));
    writeFileSync(join(app, 'index.html'), '<p>hi</p>');
    const anonymous = userEnv(home, { SVC_API_URL: url });
    const fine = await runSvc(['publish', app, '--dry-run'], anonymous);
    assert.equal(fine.code, 0, fine.stderr);
    assert.match(fine.stderr, /not signed in to .*: checked against the default package limits/);

    for (let i = 0; i < 2001; i += 1) writeFileSync(join(app, 'many', `${i}.txt`), 'x');
    const many = await runSvc(['publish', app, '--dry-run'], anonymous);
    assert.equal(many.code, 1);
    assert.match(many.stderr, /it holds 2003 files, and a package may hold at most 2000/);
    rmSync(join(app, 'many'), { recursive: true });

    writeFileSync(join(app, 'zeros.bin'), Buffer.alloc(5_000_000));
    const bomb = await runSvc(['publish', app, '--dry-run'], anonymous);
    assert.equal(bomb.code, 1);
    assert.match(bomb.stderr, /more than 10 times the package's \d+ bytes/);
  });

  test('when the command line is wrong then exit 2 with the usage', async () => {
    const missing = await svc(['keys', 'remove'], env());
    assert.equal(missing.code, 2);
    const unknown = await svc(['frobnicate'], env());
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /no command "frobnicate"/);
  });

  test('when --version or --help is asked then 5.6.x and every command with examples', async () => {
    assert.match((await svc(['--version'], env())).stdout, /^5\.6\.\d+\n$/);
    const help = await svc(['--help'], env());
    for (const command of [
      'login',
      'whoami',
      'logout',
      'status',
      'keys list',
      'keys add',
      'keys remove',
      'upgrade',
    ]) {
      assert.match(help.stdout, new RegExp(`svc ${command} +\\S`), command);
      assert.match(help.stdout, new RegExp(`\\$ svc ${command}`), `an example of ${command}`);
    }
  });
});
