/**
 * Issue 27, point 3, end to end: `svc release`, `svc rollout …` and `svc withdraw` against the
 * real service (in this process, on the test's store and its embedded broker), with versions an
 * admin approved and, for the progress table, simulated cars that run the app. The refusals a
 * person meets before any request are in release-commands.test.ts.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { provisionCars, type Simulator, startSimulator } from '@svc/car-simulator';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin, signUpDeveloper } from '../../server/test/support/accounts.ts';
import { carPath, publishMiniApp } from '../../server/test/support/commands.ts';
import { call, eventually } from '../../server/test/support/http.ts';
import { startTestService, type TestService } from '../../server/test/support/service.ts';
import { runSvc } from './support/run-svc.ts';
import { svc, svcBinary, userEnv } from './support/svc.ts';

const adminEmail = 'release-e2e-admin@example.com';

describe('releasing and rolling out with svc, end to end', () => {
  const home = mkdtempSync(join(tmpdir(), 'svc-release-e2e-'));
  let service: TestService;
  let admin: Developer;
  let developer: Developer;
  let env: NodeJS.ProcessEnv;
  const simulators: Simulator[] = [];

  /** A new app of the developer's with `versions` in order, each taken as far as its state says. */
  async function appWith(appId: string, versions: [string, 'submitted' | 'approved' | 'published'][]) {
    const ids: Record<string, string> = {};
    for (const [version, until] of versions) {
      ids[version] = await publishMiniApp(service.url, developer, admin, appId, version, until);
    }
    return ids;
  }

  /** `svc status --json`'s app, and each version's review state by its name. */
  async function statusOf(appId: string) {
    const run = await runSvc(['status', '--json'], env);
    assert.equal(run.code, 0, run.stderr);
    const app = JSON.parse(run.stdout).mini_apps.find((a: { id: string }) => a.id === appId);
    const states = Object.fromEntries(
      app.versions.map((v: { version: string; review_state: string }) => [v.version, v.review_state]),
    );
    return { live: app.live_version as string | null, states };
  }

  const rolloutOf = async (appId: string) => {
    const run = await runSvc(['rollout', 'status', appId, '--json'], env);
    assert.equal(run.code, 0, run.stderr);
    return JSON.parse(run.stdout);
  };

  beforeAll(async () => {
    service = await startTestService({ SVC_ADMIN_EMAILS: adminEmail }, { clockRuns: true });
    admin = await signUpAdmin(service, adminEmail);
    developer = await signUpDeveloper(service.url);
    // The developer's own token, as CI injects one; the sign-in itself is e2e.test.ts's.
    env = userEnv(home, { SVC_API_URL: service.url, SVC_TOKEN: developer.token });
  });

  afterAll(async () => {
    await Promise.all(simulators.map((simulator) => simulator.stop()));
    await service?.stop();
    rmSync(home, { recursive: true, force: true });
  });

  test('when an approved version is released without --rollout then it is published and live, and status says so', async () => {
    const appId = 'com.example.release-now';
    await appWith(appId, [['1.0.0', 'approved']]);
    const before = await runSvc(['status'], env);
    assert.match(
      before.stderr,
      /com\.example\.release-now 1\.0\.0 is approved: release it with `svc release/,
    );

    const run = await svc(['release', appId, '1.0.0'], env);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(
      run.stdout,
      `Released ${appId} 1.0.0: published; every car that runs an earlier version is moved to it.\n`,
    );
    assert.deepEqual(await statusOf(appId), { live: '1.0.0', states: { '1.0.0': 'published' } });

    const again = await runSvc(['release', appId, '1.0.0'], env);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /com\.example\.release-now 1\.0\.0 is published already/);
  });

  test('when a version is released with --rollout 10 then it is rolling out, the previous version stays live, and status shows the percentage', async () => {
    const appId = 'com.example.staged';
    await appWith(appId, [
      ['1.0.0', 'published'],
      ['1.1.0', 'approved'],
    ]);
    const run = await svc(['release', appId, '1.1.0', '--rollout', '10'], env);
    assert.equal(run.code, 0, run.stderr);
    assert.match(
      run.stdout,
      /^Rolling out com\.example\.staged 1\.1\.0 to 10 % of the eligible cars \(every brand the manifest lists\): rolling_out\.$/m,
    );
    assert.deepEqual(await statusOf(appId), {
      live: '1.0.0',
      states: { '1.1.0': 'rolling_out', '1.0.0': 'published' },
    });
    const listed = await runSvc(['status'], env);
    assert.match(listed.stdout, /com\.example\.staged\s+\S.*\s+1\.1\.0\s+rolling out \(10 %\)\s+1\.0\.0/);
    assert.match(
      listed.stderr,
      /1\.1\.0 is rolling out \(10 % of the cars\): follow it with `svc rollout status/,
    );

    const json = await runSvc(['release', appId, '1.1.0', '--json'], env);
    assert.equal(json.code, 1, 'a version rolling out is not released again');
    assert.match(
      json.stderr,
      /1\.1\.0 is rolling out already: see `svc rollout status com\.example\.staged`/,
    );
  });

  test('when a second version is released while a rollout is under way then the service refuses it (409), and svc shows its detail', async () => {
    const appId = 'com.example.staged';
    await appWith(appId, [['1.2.0', 'approved']]);
    // Another rollout, or a release to every car (ADR 0049: both 409 rollout_in_progress).
    for (const args of [['--rollout', '5'], []]) {
      const run = await runSvc(['release', appId, '1.2.0', ...args], env);
      assert.equal(run.code, 1, `${args.join(' ')}: ${run.stdout}`);
      assert.match(run.stderr, /^svc: .+ \(rollout_in_progress, HTTP 409\)\n/, args.join(' '));
      assert.match(
        run.stderr,
        /\n {2}See the rollout of 1\.1\.0: `svc rollout status com\.example\.staged`\.\n$/,
      );
    }
    assert.equal((await statusOf(appId)).states['1.2.0'], 'approved', 'nothing moved');
  });

  test('when the rollout is shown then it is a table of its progress, and --json is the API rollout', async () => {
    const appId = 'com.example.staged';
    const run = await svc(['rollout', 'status', appId], env);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^VERSION +1\.1\.0$/m);
    assert.match(run.stdout, /^PREVIOUS +1\.0\.0$/m);
    assert.match(run.stdout, /^PERCENT +10 %$/m);
    assert.match(run.stdout, /^BRANDS +every brand the manifest lists$/m);
    assert.match(run.stdout, /^STATE +active$/m);
    assert.match(run.stdout, /^ELIGIBLE +WAITING +QUEUED +SENT +INSTALLED +FAILED +EXPIRED\n(\d+ +){6}\d+$/m);
    const rollout = await rolloutOf(appId);
    assert.deepEqual(
      [
        rollout.app_id,
        rollout.version,
        rollout.previous_version,
        rollout.percent,
        rollout.brands,
        rollout.state,
      ],
      [appId, '1.1.0', '1.0.0', 10, null, 'active'],
    );
    assert.deepEqual(Object.keys(rollout.progress).sort(), [
      'eligible',
      'expired',
      'failed',
      'installed',
      'queued',
      'sent',
      'waiting',
    ]);
  });

  test('when the rollout is raised, paused, resumed and completed then each move changes it, and the moves its state forbids are refused clearly', async () => {
    const appId = 'com.example.staged';
    const move = (...args: string[]) => runSvc(['rollout', ...args], env);
    const refused = async (args: string[], code: string, next: RegExp) => {
      const run = await move(...args);
      assert.equal(run.code, 1, `${args.join(' ')}: ${run.stdout}`);
      assert.match(run.stderr, new RegExp(`\\(${code}, HTTP 409\\)`), args.join(' '));
      assert.match(run.stderr, next, args.join(' '));
      assert.equal(run.stdout, '');
    };

    const raised = await move('set', '50', appId);
    assert.equal(raised.code, 0, raised.stderr);
    assert.match(raised.stdout, /now reaches 50 % of the eligible cars/);
    assert.equal((await rolloutOf(appId)).percent, 50);
    await refused(
      ['set', '20', appId],
      'percent_only_grows',
      /Complete it \(`svc rollout complete com\.example\.staged`\) or roll it back \(`svc rollout rollback com\.example\.staged`\)/,
    );

    const paused = await move('pause', appId);
    assert.equal(paused.code, 0, paused.stderr);
    assert.match(paused.stdout, /^Paused the rollout of com\.example\.staged 1\.1\.0 at 50 %/);
    assert.equal((await rolloutOf(appId)).state, 'paused');
    await refused(['pause', appId], 'rollout_paused', /Resume it with `svc rollout resume/);
    await refused(['set', '60', appId], 'rollout_paused', /Resume it with/);

    const resumed = await move('resume', appId, '--json');
    assert.equal(resumed.code, 0, resumed.stderr);
    assert.equal(JSON.parse(resumed.stdout).state, 'active');
    await refused(['resume', appId], 'rollout_not_paused', /svc rollout status com\.example\.staged/);

    const completed = await move('complete', appId);
    assert.equal(completed.code, 0, completed.stderr);
    assert.match(completed.stdout, /published for every eligible car, and 1\.0\.0 is superseded/);
    assert.equal((await rolloutOf(appId)).state, 'completed');
    assert.deepEqual(await statusOf(appId), {
      live: '1.1.0',
      states: { '1.2.0': 'approved', '1.1.0': 'published', '1.0.0': 'superseded' },
    });
    await refused(['complete', appId], 'rollout_ended', /See how it ended: `svc rollout status/);
    await refused(['rollback', appId, '--yes'], 'rollout_ended', /svc rollout status/);

    // A watch of an ended rollout with nothing on its way has nothing to wait for.
    const watched = await runSvc(['rollout', 'status', appId, '--watch'], env);
    assert.equal(watched.code, 0, watched.stderr);
    assert.match(watched.stdout, /STATE +completed/);
    assert.match(watched.stderr, /The rollout of com\.example\.staged 1\.1\.0 completed/);
  });

  test('when a rollout is rolled back then the version is rolled_back, the one before stays live, and the rolled-back one cannot be released again', async () => {
    const appId = 'com.example.staged';
    const started = await runSvc(['release', appId, '1.2.0', '--rollout', '10', '--brands', 'brand_a'], env);
    assert.equal(started.code, 0, started.stderr);
    assert.deepEqual((await rolloutOf(appId)).brands, ['brand_a']);

    const unasked = await runSvc(['rollout', 'rollback', appId], env);
    assert.equal(unasked.code, 2, 'no terminal to ask on, and no --yes');
    assert.match(unasked.stderr, /run again with --yes/);
    assert.equal((await rolloutOf(appId)).state, 'active');

    const run = await svc(['rollout', 'rollback', appId, '--yes'], env);
    assert.equal(run.code, 0, run.stderr);
    assert.match(
      run.stdout,
      /Rolled back the rollout of com\.example\.staged 1\.2\.0: the cars that got it are moved back to 1\.1\.0, and 1\.2\.0 can no longer be installed/,
    );
    assert.equal((await rolloutOf(appId)).state, 'rolled_back');
    assert.deepEqual(await statusOf(appId), {
      live: '1.1.0',
      states: { '1.2.0': 'rolled_back', '1.1.0': 'published', '1.0.0': 'superseded' },
    });
    const listed = await runSvc(['status'], env);
    assert.match(listed.stdout, /com\.example\.staged\s+\S.*\s+1\.2\.0\s+rolled back\s+1\.1\.0/);
    const again = await runSvc(['release', appId, '1.2.0'], env);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /1\.2\.0 was rolled back and can no longer be installed: raise the version/);
  });

  test('when a rollout is watched and then completed then the watch prints the new state and ends by itself, exit 0', async () => {
    const appId = 'com.example.watched';
    await appWith(appId, [
      ['1.0.0', 'published'],
      ['2.0.0', 'approved'],
    ]);
    assert.equal((await runSvc(['release', appId, '2.0.0', '--rollout', '30'], env)).code, 0);

    // The built svc, as a CI job would run it: no terminal, so a new table for each change.
    const watch = spawn(process.execPath, [svcBinary, 'rollout', 'status', appId, '--watch'], { env });
    let stdout = '';
    let stderr = '';
    watch.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const ended = new Promise<number | null>((resolve) => watch.once('exit', resolve));
    await new Promise<void>((resolve) => {
      watch.stdout.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
        if (/STATE +active[\s\S]*EXPIRED\n.*\n/.test(stdout)) resolve();
      });
    });
    const completed = await runSvc(['rollout', 'complete', appId], env);
    assert.equal(completed.code, 0, completed.stderr);
    assert.equal(await ended, 0, stderr);
    const tables = stdout.split(/\n\n(?=APP)/);
    assert.ok(tables.length >= 2, stdout);
    assert.match(tables[0] ?? '', /STATE +active/);
    assert.match(tables.at(-1) ?? '', /PERCENT +100 %[\s\S]*STATE +completed/);
    assert.match(stderr, /The rollout of com\.example\.watched 2\.0\.0 completed/);
  });

  test('when a version in review is withdrawn then it is withdrawn, and a second withdraw says why not', async () => {
    const appId = 'com.example.withdrawn';
    await appWith(appId, [['0.1.0', 'submitted']]);
    const run = await svc(['withdraw', appId, '0.1.0', '--json'], env);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(JSON.parse(run.stdout).review_state, 'withdrawn');
    assert.deepEqual((await statusOf(appId)).states, { '0.1.0': 'withdrawn' });
    const listed = await runSvc(['status'], env);
    assert.match(listed.stdout, /com\.example\.withdrawn\s+\S.*\s+0\.1\.0\s+withdrawn\s+-/);

    const again = await runSvc(['withdraw', appId, '0.1.0'], env);
    assert.equal(again.code, 1);
    assert.match(
      again.stderr,
      /0\.1\.0 is withdrawn: only a version that is submitted or in review can be withdrawn/,
    );
    const release = await runSvc(['release', appId, '0.1.0'], env);
    assert.equal(release.code, 1);
    assert.match(release.stderr, /0\.1\.0 was withdrawn from review: raise the version/);
  });

  test('when simulated cars run the app then the rollout table counts them, and the watch ends once they all have the version and the rollout completed', async () => {
    const appId = 'com.example.fleet';
    await appWith(appId, [['1.0.0', 'published']]);
    const cars = await provisionCars({ apiUrl: service.url, token: admin.token, count: 4, brand: 'brand_a' });
    const quiet = { write: () => true };
    const simulator = await startSimulator({
      mqttUrl: service.mqttUrl,
      cars,
      installedApps: [{ app_id: appId, version: '1.0.0' }],
      statusEveryMs: 60_000,
      telemetryEveryMs: 60_000,
      reconnectPeriodMs: 100,
      output: quiet,
      warnings: quiet,
    });
    simulators.push(simulator);
    await eventually('the cars reported the app', async () => {
      const installs = await Promise.all(
        cars.map((car) => call(service.url, 'GET', carPath(car.deviceId, 'install'), { token: admin.token })),
      );
      return installs.every((install) => install.body.installed_apps?.length === 1);
    });
    await appWith(appId, [['1.1.0', 'approved']]);

    const released = await runSvc(['release', appId, '1.1.0', '--rollout', '100'], env);
    assert.equal(released.code, 0, released.stderr);
    await eventually(
      'every car has 1.1.0 installed',
      async () => (await rolloutOf(appId)).progress.installed === 4,
      20_000,
    );
    const shown = await runSvc(['rollout', 'status', appId], env);
    assert.match(
      shown.stdout,
      /^ELIGIBLE +WAITING +QUEUED +SENT +INSTALLED +FAILED +EXPIRED\n4 +0 +0 +0 +4 +0 +0$/m,
    );

    const completed = await runSvc(['rollout', 'complete', appId], env);
    assert.equal(completed.code, 0, completed.stderr);
    const watched = await svc(['rollout', 'status', appId, '--watch'], env);
    assert.equal(watched.code, 0, watched.stderr);
    assert.match(watched.stdout, /STATE +completed[\s\S]*\n4 +0 +0 +0 +4 +0 +0\n$/);
  });
});
