/**
 * `svc release`, `svc withdraw` and `svc rollout …` as a person meets them: what they refuse before
 * any request, what they send, and how they show a rollout. A stand-in for the service answers
 * each request as the test sets, with the contract's own shapes, so that every kind of answer can
 * be shown; the real service is in release-e2e.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, test } from 'vitest';
import { runSvc } from './support/run-svc.ts';
import { userEnv } from './support/svc.ts';
import { onTerminal } from './support/terminal.ts';

interface Reply {
  status: number;
  body: unknown;
}

const appId = 'com.example.hello-car';
/** ESC, which starts a terminal's control sequences. */
const esc = String.fromCharCode(27);

function version(
  name: string,
  reviewState: string,
  id = `7d3f1a2b-4c5d-4e6f-8a9b-0c1d2e3f4a${name.replaceAll('.', '')}`,
) {
  return {
    id: id.padEnd(36, '0').slice(0, 36),
    app_id: appId,
    version: name,
    review_state: reviewState,
    reason: null as string | null,
    manifest: { id: appId, name: 'Hello Car', version: name, entry: 'index.html', network: [] },
    package: { size: 1, sha256: 'a'.repeat(64) },
    submitted_at: '2026-11-21T10:00:00Z',
    updated_at: '2026-11-21T11:00:00Z',
  };
}

function mine(...versions: ReturnType<typeof version>[]) {
  return {
    mini_apps: [
      {
        id: appId,
        name: 'Hello Car',
        owner_id: '0b9d6f4e-1c2a-4e5b-8f3d-7a6c5b4e3d21',
        latest_version: versions[0] ?? null,
        live_version: versions.find((v) => v.review_state === 'published')?.version ?? null,
        versions,
        created_at: '2026-11-20T10:00:00Z',
        updated_at: '2026-11-21T11:00:00Z',
      },
    ],
  };
}

function rollout(state: string, percent: number, progress: Partial<Record<string, number>> = {}) {
  return {
    app_id: appId,
    version: '1.1.0',
    previous_version: '1.0.0',
    percent,
    brands: null,
    state,
    progress: {
      eligible: 120,
      waiting: 8,
      queued: 0,
      sent: 2,
      installed: 108,
      failed: 1,
      expired: 1,
      ...progress,
    },
    created_at: '2026-11-28T09:00:00Z',
    updated_at: '2026-11-28T09:30:00Z',
  };
}

const problem = (status: number, code: string, detail: string): Reply => ({
  status,
  body: { type: `/problems/${code}`, title: code, status, detail, code },
});

describe('svc release, withdraw and rollout', () => {
  const home = mkdtempSync(join(tmpdir(), 'svc-release-'));
  let server: Server;
  let url = '';
  /** By `METHOD path`: one reply, or replies given in turn (the last one again once they run out). */
  let replies: Record<string, Reply | Reply[]> = {};
  let requests: { line: string; body: unknown }[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      const line = `${req.method} ${req.url}`;
      let raw = '';
      req.on('data', (chunk: Buffer) => {
        raw += chunk.toString();
      });
      req.on('end', () => {
        requests.push({ line, body: raw ? JSON.parse(raw) : undefined });
        const set = replies[line];
        const reply = Array.isArray(set) ? (set.length > 1 ? set.shift() : set[0]) : set;
        const { status, body } = reply ?? problem(404, 'not_found', `No stand-in reply for ${line}.`);
        res.writeHead(status, {
          'content-type': status >= 400 ? 'application/problem+json' : 'application/json',
        });
        res.end(JSON.stringify(body));
      });
    });
    server.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  beforeEach(() => {
    replies = {};
    requests = [];
  });

  afterAll(() => {
    server.close();
    rmSync(home, { recursive: true, force: true });
  });

  const env = () => userEnv(home, { SVC_API_URL: url, SVC_TOKEN: 'svc_test_token_00000000000000' });
  const approved = version('1.1.0', 'approved');
  const transitions = `POST /api/v1/mini-apps/versions/${approved.id}/transitions`;
  const rolloutPath = `/api/v1/mini-apps/${appId}/rollout`;

  test('when the command line is wrong then svc says what it wants, with exit 2, before any request', async () => {
    const cases: [string[], RegExp][] = [
      [['release', 'Hello Car', '1.1.0'], /"Hello Car" is not an app id: .*com\.example\.hello-car/],
      [
        ['release', appId, '1.1.0', '--rollout', '0'],
        /--rollout must be a whole percentage from 1 to 100.*not "0"/,
      ],
      [['release', appId, '1.1.0', '--rollout', 'ten'], /--rollout must be a whole percentage/],
      [
        ['release', appId, '1.1.0', '--brands', 'brand_a'],
        /--brands limits a staged rollout: give --rollout <percent> too/,
      ],
      [
        ['release', appId, '1.1.0', '--rollout', '10', '--brands', 'brand_a,tesla'],
        /--brands has "tesla": give brands separated by commas, from brand_a, brand_b/,
      ],
      [
        ['rollout', 'set', '150', appId],
        /the percentage must be a whole percentage from 1 to 100.*not "150"/,
      ],
      [['rollout', 'status', 'nope'], /"nope" is not an app id/],
      [['withdraw', 'COM.EXAMPLE', '1.0.0'], /"COM\.EXAMPLE" is not an app id/],
    ];
    for (const [args, message] of cases) {
      const run = await runSvc(args, env());
      assert.equal(run.code, 2, `${args.join(' ')}: ${run.stderr}`);
      assert.match(run.stderr, message, args.join(' '));
    }
    assert.deepEqual(requests, []);
  });

  test('when an approved version is released then it is moved to published, and with --rollout to rolling_out with the rollout', async () => {
    replies = {
      'GET /api/v1/mini-apps/mine': { status: 200, body: mine(approved, version('1.0.0', 'published')) },
      [transitions]: { status: 200, body: { ...approved, review_state: 'published' } },
    };
    const run = await runSvc(['release', appId, '1.1.0'], env());
    assert.equal(run.code, 0, run.stderr);
    assert.equal(
      run.stdout,
      `Released ${appId} 1.1.0: published; every car that runs an earlier version is moved to it.\n`,
    );
    assert.deepEqual(requests.at(-1), { line: transitions, body: { to: 'published' } });

    replies[transitions] = { status: 200, body: { ...approved, review_state: 'rolling_out' } };
    const staged = await runSvc(
      ['release', appId, '1.1.0', '--rollout', '10%', '--brands', 'brand_a, brand_b,brand_a'],
      env(),
    );
    assert.equal(staged.code, 0, staged.stderr);
    assert.match(
      staged.stdout,
      /^Rolling out com\.example\.hello-car 1\.1\.0 to 10 % of the eligible cars \(brand_a, brand_b\): rolling_out\.$/m,
    );
    assert.match(staged.stderr, /svc rollout status com\.example\.hello-car --watch/);
    assert.deepEqual(requests.at(-1), {
      line: transitions,
      body: { to: 'rolling_out', rollout: { percent: 10, brands: ['brand_a', 'brand_b'] } },
    });

    const json = await runSvc(['release', appId, '1.1.0', '--rollout', '10', '--json'], env());
    assert.equal(json.code, 0, json.stderr);
    assert.deepEqual(
      JSON.parse(json.stdout),
      { ...approved, review_state: 'rolling_out' },
      'the API answer, whole',
    );
    assert.deepEqual(requests.at(-1)?.body, { to: 'rolling_out', rollout: { percent: 10 } });
  });

  test('when the app, the version or its state is wrong then release says so and what to do, and moves nothing', async () => {
    replies = {
      'GET /api/v1/mini-apps/mine': {
        status: 200,
        body: mine(
          version('1.2.0', 'in_review'),
          { ...version('1.1.1', 'rejected'), reason: 'Calls an undeclared origin.' },
          approved,
        ),
      },
    };
    const cases: [string[], RegExp][] = [
      [
        ['release', 'com.example.other', '1.0.0'],
        /you have no app com\.example\.other: your apps are com\.example\.hello-car \(see `svc status`\)/,
      ],
      [
        ['release', appId, '9.9.9'],
        /com\.example\.hello-car has no version 9\.9\.9: its versions are 1\.2\.0, 1\.1\.1, 1\.1\.0/,
      ],
      [
        ['release', appId, '1.2.0'],
        /com\.example\.hello-car 1\.2\.0 is in review: it can be released once an admin has approved it/,
      ],
      [
        ['release', appId, '1.1.1'],
        /1\.1\.1 was rejected \(Calls an undeclared origin\.\): fix it, then raise the version/,
      ],
      [
        ['withdraw', appId, '1.1.0'],
        /1\.1\.0 is approved: only a version that is submitted or in review can be withdrawn\. .*svc release com\.example\.hello-car 1\.1\.0/,
      ],
    ];
    for (const [args, message] of cases) {
      const run = await runSvc(args, env());
      assert.equal(run.code, 1, `${args.join(' ')}: ${run.stderr}`);
      assert.match(run.stderr, message, args.join(' '));
    }
    assert.ok(
      requests.every((request) => request.line === 'GET /api/v1/mini-apps/mine'),
      'only reads',
    );
  });

  test('when the service refuses a release because a rollout is under way then its detail is shown, with where to see the rollout', async () => {
    replies = {
      'GET /api/v1/mini-apps/mine': { status: 200, body: mine(approved) },
      [transitions]: problem(
        409,
        'rollout_in_progress',
        'com.example.hello-car 1.0.5 is rolling out: complete it or roll it back first.',
      ),
    };
    const run = await runSvc(['release', appId, '1.1.0', '--rollout', '5'], env());
    assert.equal(run.code, 1);
    assert.match(
      run.stderr,
      /^svc: com\.example\.hello-car 1\.0\.5 is rolling out: complete it or roll it back first\. \(rollout_in_progress, HTTP 409\)\n {2}See the rollout: `svc rollout status com\.example\.hello-car`\.\n$/,
    );
  });

  test('when a submitted version is withdrawn then it is moved to withdrawn', async () => {
    const submitted = version('1.2.0', 'submitted');
    const path = `POST /api/v1/mini-apps/versions/${submitted.id}/transitions`;
    replies = {
      'GET /api/v1/mini-apps/mine': { status: 200, body: mine(submitted) },
      [path]: { status: 200, body: { ...submitted, review_state: 'withdrawn' } },
    };
    const run = await runSvc(['withdraw', appId, '1.2.0'], env());
    assert.equal(run.code, 0, run.stderr);
    assert.match(
      run.stdout,
      /^Withdrew com\.example\.hello-car 1\.2\.0 from review: withdrawn; it can never be released\.$/m,
    );
    assert.deepEqual(requests.at(-1), { line: path, body: { to: 'withdrawn' } });
  });

  test('when the rollout is shown then it reads as a table of its progress, and --json is the API answer', async () => {
    replies = { [`GET ${rolloutPath}`]: { status: 200, body: rollout('active', 10) } };
    const run = await runSvc(['rollout', 'status', appId], env());
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^APP +com\.example\.hello-car$/m);
    assert.match(run.stdout, /^VERSION +1\.1\.0$/m);
    assert.match(run.stdout, /^PREVIOUS +1\.0\.0$/m);
    assert.match(run.stdout, /^PERCENT +10 %$/m);
    assert.match(run.stdout, /^BRANDS +every brand the manifest lists$/m);
    assert.match(run.stdout, /^STATE +active$/m);
    assert.match(
      run.stdout,
      /^ELIGIBLE +WAITING +QUEUED +SENT +INSTALLED +FAILED +EXPIRED\n120 +8 +0 +2 +108 +1 +1$/m,
    );
    assert.match(run.stderr, /Raise it with `svc rollout set <percent> com\.example\.hello-car`/);

    const json = await runSvc(['rollout', 'status', appId, '--json'], env());
    assert.deepEqual(JSON.parse(json.stdout), rollout('active', 10));

    replies = {
      [`GET ${rolloutPath}`]: problem(404, 'no_rollout', 'com.example.hello-car has had no rollout.'),
    };
    const none = await runSvc(['rollout', 'status', appId], env());
    assert.equal(none.code, 1);
    assert.match(
      none.stderr,
      /has had no rollout\. \(no_rollout, HTTP 404\)\n {2}Start one with `svc release com\.example\.hello-car <version> --rollout <percent>`/,
    );
  });

  test('when the rollout is moved then each move is sent as the contract says and said back', async () => {
    const moves = `POST ${rolloutPath}/moves`;
    const cases: [string[], unknown, Reply['body'], RegExp][] = [
      [
        ['set', '50', appId],
        { move: 'set_percent', percent: 50 },
        rollout('active', 50),
        /now reaches 50 % of the eligible cars/,
      ],
      [['set', appId, '60'], { move: 'set_percent', percent: 60 }, rollout('active', 60), /now reaches 60 %/],
      [
        ['pause', appId],
        { move: 'pause' },
        rollout('paused', 60),
        /^Paused the rollout of com\.example\.hello-car 1\.1\.0 at 60 %/,
      ],
      [['resume', appId], { move: 'resume' }, rollout('active', 60), /^Resumed the rollout/],
      [
        ['complete', appId],
        { move: 'complete' },
        rollout('completed', 100),
        /published for every eligible car, and 1\.0\.0 is superseded/,
      ],
      [
        ['rollback', appId, '--yes'],
        { move: 'rollback' },
        rollout('rolled_back', 60),
        /moved back to 1\.0\.0, and 1\.1\.0 can no longer be installed/,
      ],
    ];
    for (const [args, sent, answer, said] of cases) {
      replies = { [moves]: { status: 200, body: answer } };
      const run = await runSvc(['rollout', ...args], env());
      assert.equal(run.code, 0, `${args.join(' ')}: ${run.stderr}`);
      assert.match(run.stdout, said, args.join(' '));
      assert.deepEqual(requests.at(-1), { line: moves, body: sent });
      const json = await runSvc(['rollout', ...args, '--json'], env());
      assert.deepEqual(JSON.parse(json.stdout), answer, `${args.join(' ')} --json`);
    }
  });

  test('when the service refuses a move (409) then its detail is shown with the next step, exit 1', async () => {
    const moves = `POST ${rolloutPath}/moves`;
    const cases: [string[], Reply, RegExp][] = [
      [
        ['set', '5', appId],
        problem(409, 'percent_only_grows', 'The rollout is at 10 %: a percentage only grows.'),
        /a percentage only grows\. \(percent_only_grows, HTTP 409\)\n {2}Complete it \(`svc rollout complete com\.example\.hello-car`\) or roll it back \(`svc rollout rollback com\.example\.hello-car`\)/,
      ],
      [
        ['pause', appId],
        problem(409, 'rollout_paused', 'The rollout is paused.'),
        /The rollout is paused\. \(rollout_paused, HTTP 409\)\n {2}Resume it with `svc rollout resume com\.example\.hello-car`/,
      ],
      [
        ['resume', appId],
        problem(409, 'rollout_not_paused', 'The rollout is not paused.'),
        /rollout_not_paused, HTTP 409/,
      ],
      [
        ['complete', appId],
        problem(409, 'rollout_ended', 'The rollout has completed.'),
        /has completed\. \(rollout_ended, HTTP 409\)\n {2}See how it ended: `svc rollout status com\.example\.hello-car`/,
      ],
    ];
    for (const [args, reply, message] of cases) {
      replies = { [moves]: reply };
      const run = await runSvc(['rollout', ...args], env());
      assert.equal(run.code, 1, args.join(' '));
      assert.match(run.stderr, message, args.join(' '));
      assert.equal(run.stdout, '');
    }
  });

  test('when rollback has no --yes and no terminal then it refuses with exit 2 and names --yes, and nothing is moved', async () => {
    const run = await runSvc(['rollout', 'rollback', appId], env());
    assert.equal(run.code, 2);
    assert.match(run.stderr, /cannot be undone: run again with --yes/);
    assert.deepEqual(requests, []);
  });

  test('when rollback is asked on a terminal then it says what it will do, and only yes rolls back', async () => {
    replies = {
      [`GET ${rolloutPath}`]: { status: 200, body: rollout('active', 10) },
      [`POST ${rolloutPath}/moves`]: { status: 200, body: rollout('rolled_back', 10) },
    };
    const terminalEnv = { ...env(), TERM: 'dumb' };
    const no = await onTerminal(['rollout', 'rollback', appId], terminalEnv, 'n', 'Roll it back?');
    assert.equal(no.code, 1, no.screen);
    assert.match(
      no.screen,
      /is active at 10 %, and 108 cars have it installed\. Rolling it back moves the cars that got it back to 1\.0\.0/,
    );
    assert.match(no.screen, /Nothing rolled back/);
    assert.ok(!requests.some((request) => request.line.startsWith('POST')));

    const yes = await onTerminal(['rollout', 'rollback', appId], terminalEnv, 'y', 'Roll it back?');
    assert.equal(yes.code, 0, yes.screen);
    assert.match(yes.screen, /Rolled back the rollout of com\.example\.hello-car 1\.1\.0/);
    assert.deepEqual(requests.at(-1)?.body, { move: 'rollback' });
  });

  test('when the rollout is watched without a terminal then a new table is printed when it changes, until it completes, exit 0', async () => {
    replies = {
      [`GET ${rolloutPath}`]: [
        { status: 200, body: rollout('active', 10, { queued: 2, sent: 0 }) },
        { status: 200, body: rollout('completed', 100, { queued: 1 }) },
        { status: 200, body: rollout('completed', 100, { queued: 0, sent: 0 }) },
      ],
    };
    const run = await runSvc(['rollout', 'status', appId, '--watch'], env());
    assert.equal(run.code, 0, run.stderr);
    const tables = run.stdout.split(/\n\n(?=APP)/);
    assert.equal(tables.length, 3, run.stdout);
    assert.match(tables[0] ?? '', /STATE +active/);
    assert.match(tables[2] ?? '', /STATE +completed[\s\S]*\n120 +8 +0 +0 +108 +1 +1\n$/);
    assert.ok(!run.stdout.includes(esc), 'no terminal codes in a log');
    assert.match(run.stderr, /The rollout of com\.example\.hello-car 1\.1\.0 completed/);
  });

  test('when a watched rollout is rolled back then the watch ends with exit 1, and --json gives one line a change', async () => {
    replies = {
      [`GET ${rolloutPath}`]: [
        { status: 200, body: rollout('paused', 10) },
        { status: 200, body: rollout('rolled_back', 10, { sent: 0 }) },
      ],
    };
    const run = await runSvc(['rollout', 'status', appId, '--watch', '--json'], env());
    assert.equal(run.code, 1, run.stderr);
    const lines = run.stdout
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line));
    assert.deepEqual(
      lines.map((line) => line.state),
      ['paused', 'rolled_back'],
    );
    assert.match(run.stderr, /was rolled back: the cars that got it were moved back to 1\.0\.0/);
  });

  test('when the rollout is watched on a terminal then its table is redrawn in place', async () => {
    replies = {
      [`GET ${rolloutPath}`]: [
        { status: 200, body: rollout('active', 10) },
        { status: 200, body: rollout('rolled_back', 10, { sent: 0 }) },
      ],
    };
    const { code, screen } = await onTerminal(
      ['rollout', 'status', appId, '--watch'],
      { ...env(), TERM: 'dumb' },
      '',
    );
    assert.equal(code, 1, screen);
    assert.match(screen, /Ctrl-C stops watching/);
    // Up over the first frame's lines, cleared, and the second frame drawn there.
    assert.match(
      screen,
      new RegExp(`${esc}\\[\\d+A${esc}\\[0JAPP +com\\.example\\.hello-car[\\s\\S]*STATE +rolled back`),
    );
  });

  test('when status lists versions rolling out and approved then it says so in words, with the percentage and the next step', async () => {
    replies = {
      'GET /api/v1/mini-apps/mine': {
        status: 200,
        body: mine(
          version('1.2.0', 'approved'),
          version('1.1.0', 'rolling_out'),
          version('1.0.0', 'published'),
        ),
      },
      [`GET ${rolloutPath}`]: { status: 200, body: rollout('active', 10) },
    };
    const run = await runSvc(['status'], env());
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /com\.example\.hello-car\s+Hello Car\s+1\.2\.0\s+approved\s+1\.0\.0/);
    assert.match(
      run.stderr,
      /1\.2\.0 is approved: release it once the rollout under way has ended \(`svc rollout complete\|rollback com\.example\.hello-car`\)/,
    );
    assert.match(
      run.stderr,
      /1\.1\.0 is rolling out \(10 % of the cars\): follow it with `svc rollout status com\.example\.hello-car`/,
    );

    replies['GET /api/v1/mini-apps/mine'] = {
      status: 200,
      body: mine(version('1.1.0', 'rolling_out'), version('1.0.0', 'published')),
    };
    const rolling = await runSvc(['status'], env());
    assert.match(rolling.stdout, /1\.1\.0\s+rolling out \(10 %\)\s+1\.0\.0/);
    replies[`GET ${rolloutPath}`] = { status: 200, body: rollout('paused', 50) };
    const paused = await runSvc(['status'], env());
    assert.match(paused.stdout, /1\.1\.0\s+rolling out \(50 %, paused\)\s+1\.0\.0/);
    replies['GET /api/v1/mini-apps/mine'] = {
      status: 200,
      body: mine(version('1.1.0', 'rolled_back'), version('1.0.0', 'in_review')),
    };
    const back = await runSvc(['status'], env());
    assert.match(back.stdout, /1\.1\.0\s+rolled back\s+-/);
  });

  test('when help is asked then the new commands are listed with examples, and each explains itself', async () => {
    const help = await runSvc(['--help'], env());
    for (const command of [
      'release',
      'withdraw',
      'rollout status',
      'rollout set',
      'rollout pause',
      'rollout resume',
      'rollout complete',
      'rollout rollback',
    ]) {
      assert.match(help.stdout, new RegExp(`svc ${command} +\\S`), command);
      assert.match(help.stdout, new RegExp(`\\$ svc ${command}`), `an example of ${command}`);
    }
    const release = await runSvc(['release', '--help'], env());
    assert.equal(release.code, 0);
    assert.match(release.stdout, /--rollout <percent> +Start a staged rollout/);
    assert.match(release.stdout, /--brands <brand,…> +Limit the rollout/);
    const rollout = await runSvc(['rollout'], env());
    assert.match(rollout.stdout, /svc rollout set <percent> <app-id>/);
  });
});
