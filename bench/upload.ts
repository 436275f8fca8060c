// `npm run bench:upload`: memory and speed of `svc publish` with a ~200 MiB package, against `curl -T`.
/*
 * Process layout: the real service runs in a child process of its own (`server/src/main.ts`, embedded
 * PGlite, a temporary DATA_DIR, started as the end-to-end tests start it), and so does every client:
 * the built `svc` under GNU time (whose "maximum resident set size" is the CLI's peak), and `curl -T`
 * as the baseline. This process only starts them and reads the service's memory from /proc, so its
 * own heap counts nowhere.
 *
 * The app is random bytes, which do not compress, so the package is as large as the folder. The folder
 * stays just under 200 MiB because the service refuses a package that unpacks to more.
 *
 * Throughput: svc's is the PUT phase only, from its summary line (`uploaded … (N MiB/s)`, timed from
 * just before the request to the service's answer; packing and submitting are left out). curl's is
 * `%{speed_upload}` of `curl -T` to a fresh presigned URL. Medians over the rounds, and their ratio.
 *
 * What curl sends, and when: a package written a moment ago goes up markedly slower than one written
 * long before (about 30% slower, for curl as for svc, on a 2-core VM with /tmp on disk; its pages
 * are still dirty then, and the packing has just kept both cores busy). svc always sends the package
 * it has just packed, so the baseline does too: each round the CLI's own packer packs the same
 * folder (same manifest, hence the same bytes as svc's) right before curl sends it. For reference,
 * curl also sends the package packed once at the start. The three steps of a round rotate, so that
 * each follows each kind of step (a PUT, a submit) equally often: how fast the service takes a PUT
 * also depends on what it did just before. Rounds in multiples of 3 balance exactly.
 *
 * Packages in a bucket: a second service, the same but with S3_BUCKET naming a bucket of s3rver (an
 * S3-compatible server from npm, run in this process), takes the same curl -T. After the rounds
 * above, each of BENCH_RUNS more rounds packs the folder once per upload and sends it with curl to
 * the filesystem service and to the bucket service, in turns (which goes first alternates). Their
 * medians' ratio is the bucket row; the goal is 0.8×. s3rver writes each part to disk and copies
 * them into one file on completion, which a real S3 does not do on this machine's disk. So each round
 * also sends the package into the bucket with the SDK's multipart upload alone (the service's part
 * settings, from a process of its own): what s3rver takes at best, which shows the service's own cost
 * apart from s3rver's.
 *
 * Memory: the service's growth is its peak resident set while svc publishes (VmHWM, reset through
 * /proc/<pid>/clear_refs before each step, and VmRSS polled every 50 ms in case the reset is not
 * allowed) less its resident set just before. Memory figures are the worst round, not the median:
 * the goals are ceilings. The first round starts on a service that has taken no upload yet.
 *
 * Settings (environment): BENCH_RUNS rounds (3), BENCH_APP_MIB size of the app folder in MiB (190).
 * Linux only (/proc); needs ssh-keygen, curl and GNU time (`apt-get install -y time`).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream, existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { listPackageFiles, type PackedPackage, packPackage } from '../cli/src/publish/pack.ts';
import { buildCli, cliDist } from '../scripts/build-cli.ts';
import { s3rverCredentials, startS3rver, type TestBucket } from '../server/test/support/s3rver.ts';
import { startServiceProcess } from '../server/test/support/service-process.ts';
import { announceSmokeRun, median, positiveInteger } from './support/settings.ts';
import { printTable } from './table.ts';

const mib = 1024 * 1024;
const goals = { serverGrowthMib: 64, cliPeakMib: 150, uploadRatio: 0.8, bucketRatio: 0.8 };
const svcBinary = join(cliDist, 'svc.js');
const gnuTime = '/usr/bin/time';
const appId = 'com.example.bench';
const appFileMib = 10;

// ---------------------------------------------------------------------------------------------
// Child processes.

interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to the end with its output captured (pipes, so `svc` is not on a terminal). */
async function run(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<Finished> {
  const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => {
    stdout += text;
  });
  child.stderr.setEncoding('utf8').on('data', (text: string) => {
    stderr += text;
  });
  const [code] = (await once(child, 'close')) as [number | null];
  return { code, stdout, stderr };
}

/** Runs `command` under GNU time; `peakMib` is the largest resident set the command had. */
async function runMeasured(
  timeFile: string,
  command: string[],
  env: NodeJS.ProcessEnv,
): Promise<Finished & { peakMib: number }> {
  const finished = await run(gnuTime, ['-f', '%M', '-o', timeFile, ...command], env);
  // GNU time writes its own complaints (a signal, an exit code) above the figure.
  const kib = Number((await readFile(timeFile, 'utf8')).trim().split('\n').at(-1));
  if (!(kib > 0)) throw new Error(`${gnuTime} wrote no maximum resident set size`);
  return { ...finished, peakMib: kib / 1024 };
}

interface RunningService {
  url: string;
  pid: number;
  /** The end of what it logged, for the message when something fails. */
  log(): string;
  stop(): Promise<void>;
}

async function startService(dataDir: string, env: Record<string, string> = {}): Promise<RunningService> {
  const service = await startServiceProcess({
    dataDir,
    env: { HOST: '127.0.0.1', SVC_MAX_PACKAGE_BYTES: String(300 * mib), ...env },
  });
  const { pid } = service.child;
  if (pid === undefined) throw new Error('the service has no process id');
  // Only the end is kept; reading it at all keeps a chatty service from filling the pipe and stalling.
  let log = '';
  service.child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    log = (log + text).slice(-8000);
  });
  return { url: service.url, pid, log: () => log, stop: () => service.stop() };
}

// ---------------------------------------------------------------------------------------------
// The service's memory, from /proc.

async function procStatusKib(pid: number, field: 'VmRSS' | 'VmHWM'): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status);
  if (!match?.[1]) throw new Error(`/proc/${pid}/status has no ${field}`);
  return Number(match[1]);
}

/** Resets the kernel's peak (VmHWM) to the current resident set; false where that is not allowed. */
async function resetPeak(pid: number): Promise<boolean> {
  try {
    await writeFile(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/** The service's resident set just before `during`, and its peak while `during` runs, in MiB. */
async function watchMemory<T>(
  pid: number,
  during: () => Promise<T>,
): Promise<{ result: T; beforeMib: number; peakMib: number }> {
  const peakIsReset = await resetPeak(pid);
  const before = await procStatusKib(pid, 'VmRSS');
  let polled = before;
  const poll = setInterval(() => {
    procStatusKib(pid, 'VmRSS').then(
      (rss) => {
        polled = Math.max(polled, rss);
      },
      () => {},
    );
  }, 50);
  try {
    const result = await during();
    const peak = Math.max(polled, peakIsReset ? await procStatusKib(pid, 'VmHWM') : 0);
    return { result, beforeMib: before / 1024, peakMib: peak / 1024 };
  } finally {
    clearInterval(poll);
  }
}

// ---------------------------------------------------------------------------------------------
// The developer: account, key, `svc login`, and the app folder.

type Answer = { status: number; body: Record<string, unknown> };

async function callJson(url: string, body: unknown, token?: string): Promise<Answer> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  try {
    return { status: response.status, body: JSON.parse(text) as Record<string, unknown> };
  } catch {
    return { status: response.status, body: { text } };
  }
}

async function expectCreated(what: string, answer: Promise<Answer>): Promise<Record<string, unknown>> {
  const { status, body } = await answer;
  if (status !== 201) throw new Error(`${what} answered ${status}: ${JSON.stringify(body)}`);
  return body;
}

/** What the web console does: an account, a password session, the first key pasted in. Returns the token. */
async function signUpWithKey(base: string, publicKey: string): Promise<string> {
  const email = 'bench@example.com';
  const password = 'correct horse battery staple';
  await expectCreated(
    'sign-up',
    callJson(`${base}/api/v1/account/signup`, { email, password, name: 'Bench' }),
  );
  const session = await expectCreated(
    'sign-in',
    callJson(`${base}/api/v1/account/sessions`, { email, password }),
  );
  const token = session.access_token;
  if (typeof token !== 'string') throw new Error(`sign-in gave no token: ${JSON.stringify(session)}`);
  await expectCreated(
    'adding the key',
    callJson(`${base}/api/v1/dev/keys`, { public_key: publicKey }, token),
  );
  return token;
}

async function makeKey(home: string): Promise<{ path: string; publicLine: string }> {
  const dir = join(home, '.ssh');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const path = join(dir, 'id_ed25519');
  const made = await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'bench', '-f', path], {
    PATH: process.env.PATH,
  });
  if (made.code !== 0) throw new Error(`ssh-keygen failed: ${made.stderr}`);
  return { path, publicLine: (await readFile(`${path}.pub`, 'utf8')).trim() };
}

async function writeManifest(dir: string, version: string): Promise<void> {
  const manifest = {
    id: appId,
    name: 'Upload Bench',
    version,
    entry: 'index.html',
    network: ['https://api.example.com'],
  };
  await writeFile(join(dir, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
}

/** `totalMib` of random bytes in files of 10 MiB, written 1 MiB at a time, plus index.html and a manifest. */
async function writeApp(dir: string, totalMib: number): Promise<void> {
  await mkdir(join(dir, 'assets'), { recursive: true });
  await writeFile(join(dir, 'index.html'), '<!doctype html><title>Upload Bench</title><h1>bench</h1>\n');
  await writeManifest(dir, '1.0.0');
  for (let file = 0, left = totalMib; left > 0; file++, left -= appFileMib) {
    const out = createWriteStream(join(dir, 'assets', `blob-${String(file).padStart(3, '0')}.bin`));
    for (let piece = 0; piece < Math.min(left, appFileMib); piece++) {
      if (!out.write(randomBytes(mib))) await once(out, 'drain');
    }
    out.end();
    await once(out, 'finish');
  }
}

// ---------------------------------------------------------------------------------------------
// The steps of a round.

interface SvcPublish {
  seconds: number;
  uploadMibPerSecond: number;
  cliPeakMib: number;
  serverBeforeMib: number;
  serverGrowthMib: number;
}

interface CurlUpload {
  uploadMibPerSecond: number;
  serverGrowthMib: number;
}

const unitMib: Record<string, number> = { B: 1 / mib, KiB: 1 / 1024, MiB: 1, GiB: 1024 };

/** The rate in `uploaded 190.0 MiB in 1.2s (158.3 MiB/s)`, which svc prints when not on a terminal. */
function uploadRate(stderr: string): number {
  const match = /^uploaded \S+ \S+ in \S+s \(([\d.]+) (B|KiB|MiB|GiB)\/s\)$/m.exec(stderr);
  if (!match?.[1] || !match[2]) throw new Error(`svc publish printed no upload summary:\n${stderr}`);
  return Number(match[1]) * (unitMib[match[2]] ?? Number.NaN);
}

async function publishWithSvc(
  service: RunningService,
  env: NodeJS.ProcessEnv,
  appDir: string,
  timeFile: string,
): Promise<SvcPublish> {
  const started = process.hrtime.bigint();
  const { result, beforeMib, peakMib } = await watchMemory(service.pid, () =>
    runMeasured(timeFile, [process.execPath, svcBinary, 'publish', appDir], env),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (result.code !== 0 || !/^Submitted /m.test(result.stdout)) {
    throw new Error(
      `svc publish exited with ${result.code}:\n${result.stdout}${result.stderr}\nservice log:\n${service.log()}`,
    );
  }
  return {
    seconds,
    uploadMibPerSecond: uploadRate(result.stderr),
    cliPeakMib: result.peakMib,
    serverBeforeMib: beforeMib,
    serverGrowthMib: peakMib - beforeMib,
  };
}

async function uploadWithCurl(
  service: RunningService,
  token: string,
  packed: { path: string; size: number; sha256: string },
): Promise<CurlUpload> {
  const target = await expectCreated(
    'upload-url',
    callJson(
      `${service.url}/api/v1/mini-apps/upload-url`,
      // curl's uploads are never submitted; a version above every round's keeps its URL allowed.
      { app_id: appId, version: '999.0.0', size: packed.size, sha256: packed.sha256 },
      token,
    ),
  );
  const { result, beforeMib, peakMib } = await watchMemory(service.pid, () =>
    run(
      'curl',
      [
        ...['-s', '-o', '/dev/null', '-w', '%{time_total} %{speed_upload} %{http_code}'],
        ...['-T', packed.path, '-H', 'content-type: application/gzip', String(target.upload_url)],
      ],
      { PATH: process.env.PATH },
    ),
  );
  const [, speed, status] = result.stdout.trim().split(' ');
  if (result.code !== 0 || status !== '201') {
    throw new Error(
      `curl -T exited with ${result.code}, HTTP ${status}: ${result.stderr}\nservice log:\n${service.log()}`,
    );
  }
  return { uploadMibPerSecond: Number(speed) / mib, serverGrowthMib: peakMib - beforeMib };
}

/** Packs `appDir` as svc does, then sends that package with curl at once, as svc does with its own. */
async function packThenCurl(service: RunningService, token: string, appDir: string): Promise<CurlUpload> {
  const packed = await packPackage(appDir, await listPackageFiles(appDir));
  try {
    return await uploadWithCurl(service, token, packed);
  } finally {
    await packed.remove();
  }
}

/** Packs the app, then sends it into the bucket with the SDK alone, from a process of its own. */
async function packThenUploadDirect(bucket: TestBucket, appDir: string, key: string): Promise<number> {
  const packed = await packPackage(appDir, await listPackageFiles(appDir));
  try {
    const script = fileURLToPath(new URL('./support/upload-to-bucket.ts', import.meta.url));
    const finished = await run(process.execPath, ['--import', 'tsx', script, packed.path, key], {
      ...process.env,
      ...bucket.env,
    });
    const rate = Number(finished.stdout.trim());
    if (finished.code !== 0 || !Number.isFinite(rate)) {
      throw new Error(`the direct upload into the bucket failed:\n${finished.stderr}`);
    }
    return rate;
  } finally {
    await packed.remove();
  }
}

// ---------------------------------------------------------------------------------------------
// The report.

type Step = 'svc' | 'curl' | 'curl, old file';

interface Round {
  order: Step[];
  svc: SvcPublish;
  curl: CurlUpload;
  curlOldFile: CurlUpload;
}

/** A round of the bucket comparison: the same package, packed just before each upload. */
interface BucketRound {
  bucketFirst: boolean;
  filesystem: CurlUpload;
  bucket: CurlUpload;
  /** MiB/s of the SDK's multipart upload of a package straight into the bucket, no service between. */
  directMibPerSecond: number;
}

function report(rounds: Round[], bucketRounds: BucketRound[], cliIdleMib: number, packageMib: number): void {
  process.stdout.write(`\npackage ${packageMib.toFixed(1)} MiB; ${rounds.length} rounds, steps rotating\n\n`);
  const shortName: Record<Step, string> = { svc: 'svc', curl: 'curl', 'curl, old file': 'old' };
  printTable(
    [
      'round',
      'order',
      'publish s',
      'svc MiB/s',
      'curl MiB/s',
      'old MiB/s',
      'CLI peak MiB',
      'service MiB',
      'svc +MiB',
      'curl +MiB',
    ],
    rounds.map((round, index) => [
      String(index + 1),
      round.order.map((step) => shortName[step]).join(','),
      round.svc.seconds.toFixed(1),
      round.svc.uploadMibPerSecond.toFixed(1),
      round.curl.uploadMibPerSecond.toFixed(1),
      round.curlOldFile.uploadMibPerSecond.toFixed(1),
      round.svc.cliPeakMib.toFixed(1),
      round.svc.serverBeforeMib.toFixed(1),
      round.svc.serverGrowthMib.toFixed(1),
      round.curl.serverGrowthMib.toFixed(1),
    ]),
    2,
  );
  process.stdout.write(
    'publish s: all of svc publish (pack, upload, submit). svc MiB/s: its PUT phase. curl MiB/s: curl -T of\n' +
      'the same package packed just before; old MiB/s: of the package packed at the start. service MiB: its\n' +
      'resident set before the publish; svc +MiB, curl +MiB: how much it grew during svc publish and curl.\n\n',
  );

  printTable(
    ['bucket round', 'order', 'filesystem MiB/s', 'bucket MiB/s', 'bucket +MiB', 'direct MiB/s'],
    bucketRounds.map((round, index) => [
      String(index + 1),
      round.bucketFirst ? 'bucket,fs' : 'fs,bucket',
      round.filesystem.uploadMibPerSecond.toFixed(1),
      round.bucket.uploadMibPerSecond.toFixed(1),
      round.bucket.serverGrowthMib.toFixed(1),
      round.directMibPerSecond.toFixed(1),
    ]),
    2,
  );
  process.stdout.write(
    'curl -T of the same package (packed just before each) to the filesystem service and to the service\n' +
      "whose packages go to s3rver's bucket; bucket +MiB: how much that service grew meanwhile; direct: the\n" +
      "SDK's multipart upload (the service's part size and parts in flight) straight into s3rver's bucket.\n\n",
  );

  const worst = (values: number[]) => Math.max(...values);
  const serverGrowth = worst(rounds.map((round) => round.svc.serverGrowthMib));
  const cliPeak = worst(rounds.map((round) => round.svc.cliPeakMib));
  const svcRate = median(rounds.map((round) => round.svc.uploadMibPerSecond));
  const curlRate = median(rounds.map((round) => round.curl.uploadMibPerSecond));
  const oldFileRate = median(rounds.map((round) => round.curlOldFile.uploadMibPerSecond));
  const ratio = svcRate / curlRate;
  const filesystemRate = median(bucketRounds.map((round) => round.filesystem.uploadMibPerSecond));
  const bucketRate = median(bucketRounds.map((round) => round.bucket.uploadMibPerSecond));
  const bucketRatio = bucketRate / filesystemRate;
  const bucketGrowth = worst(bucketRounds.map((round) => round.bucket.serverGrowthMib));
  const directRate = median(bucketRounds.map((round) => round.directMibPerSecond));
  const verdict = (met: boolean) => (met ? 'met' : 'NOT met');
  const verdicts = [
    serverGrowth <= goals.serverGrowthMib,
    cliPeak <= goals.cliPeakMib,
    ratio >= goals.uploadRatio,
    bucketRatio >= goals.bucketRatio,
  ] as const;
  printTable(
    ['measure', 'value', 'goal', ''],
    [
      [
        'service RSS growth, svc publish (worst)',
        `${serverGrowth.toFixed(1)} MiB`,
        `<= ${goals.serverGrowthMib} MiB`,
        verdict(verdicts[0]),
      ],
      [
        '  reference: during curl -T (worst)',
        `${worst(rounds.map((round) => round.curl.serverGrowthMib)).toFixed(1)} MiB`,
        '',
        '',
      ],
      [
        'CLI peak RSS, svc publish (worst)',
        `${cliPeak.toFixed(1)} MiB`,
        `<= ${goals.cliPeakMib} MiB`,
        verdict(verdicts[1]),
      ],
      ['  reference: svc --version', `${cliIdleMib.toFixed(1)} MiB`, '', ''],
      ['upload, svc publish PUT phase (median)', `${svcRate.toFixed(1)} MiB/s`, '', ''],
      ['upload, curl -T, packed just before (median)', `${curlRate.toFixed(1)} MiB/s`, '', ''],
      ['svc / curl', `${ratio.toFixed(2)}x`, `>= ${goals.uploadRatio}x`, verdict(verdicts[2])],
      ['  reference: curl -T, packed at the start', `${oldFileRate.toFixed(1)} MiB/s`, '', ''],
      ['  reference: svc / that', `${(svcRate / oldFileRate).toFixed(2)}x`, '', ''],
      ['upload to the bucket service, curl -T (median)', `${bucketRate.toFixed(1)} MiB/s`, '', ''],
      [
        'upload to the filesystem service, curl -T, same rounds',
        `${filesystemRate.toFixed(1)} MiB/s`,
        '',
        '',
      ],
      ['bucket / filesystem', `${bucketRatio.toFixed(2)}x`, `>= ${goals.bucketRatio}x`, verdict(verdicts[3])],
      ['  reference: bucket service RSS growth (worst)', `${bucketGrowth.toFixed(1)} MiB`, '', ''],
      ['  reference: multipart straight into s3rver (median)', `${directRate.toFixed(1)} MiB/s`, '', ''],
      ['  reference: bucket service / that', `${(bucketRate / directRate).toFixed(2)}x`, '', ''],
    ],
    1,
  );
  process.stdout.write(`${verdicts.every(Boolean) ? 'all goals met' : 'a goal is NOT met'}\n`);
}

async function main(): Promise<void> {
  announceSmokeRun('bench:upload');
  const rounds = positiveInteger('BENCH_RUNS', 3, 1);
  const appMib = positiveInteger('BENCH_APP_MIB', 190, 2);
  if (!existsSync(gnuTime)) throw new Error(`${gnuTime} is missing: apt-get install -y time`);

  await buildCli();
  const scratch = await mkdtemp(join(tmpdir(), 'svc-bench-upload-'));
  const home = join(scratch, 'home');
  const appDir = join(scratch, 'app');
  const timeFile = join(scratch, 'time.txt');
  let service: RunningService | undefined;
  let bucketService: RunningService | undefined;
  let bucket: TestBucket | undefined;
  let oldPackage: PackedPackage | undefined;
  try {
    process.stderr.write(`writing a ${appMib} MiB app of random bytes\n`);
    await writeApp(appDir, appMib);
    const packedAtStart = await packPackage(appDir, await listPackageFiles(appDir));
    oldPackage = packedAtStart;

    const running = await startService(join(scratch, 'data'));
    service = running;
    const key = await makeKey(home);
    const token = await signUpWithKey(running.url, key.publicLine);
    // svc's package goes to a temp folder: ours, so that nothing is left behind if it is killed.
    await mkdir(join(scratch, 'tmp'));
    const env = {
      PATH: process.env.PATH,
      HOME: home,
      TMPDIR: join(scratch, 'tmp'),
      NO_COLOR: '1',
      SVC_API_URL: running.url,
    };
    const login = await run(process.execPath, [svcBinary, 'login', '--key', key.path], env);
    if (login.code !== 0) throw new Error(`svc login exited with ${login.code}: ${login.stderr}`);
    const idle = await runMeasured(timeFile, [process.execPath, svcBinary, '--version'], env);
    if (idle.code !== 0) throw new Error(`svc --version exited with ${idle.code}: ${idle.stderr}`);

    const steps: Step[] = ['svc', 'curl', 'curl, old file'];
    const measured: Round[] = [];
    for (let round = 0; round < rounds; round++) {
      // Each submitted version must be greater than the ones before it; svc and curl pack the same one.
      await writeManifest(appDir, `1.0.${round}`);
      const order = steps.map((_, index) => steps[(index + round) % steps.length] as Step);
      const results: Partial<Pick<Round, 'svc' | 'curl' | 'curlOldFile'>> = {};
      for (const step of order) {
        process.stderr.write(`round ${round + 1}/${rounds}: ${step}\n`);
        if (step === 'svc') results.svc = await publishWithSvc(running, env, appDir, timeFile);
        else if (step === 'curl') results.curl = await packThenCurl(running, token, appDir);
        else results.curlOldFile = await uploadWithCurl(running, token, packedAtStart);
      }
      const { svc, curl, curlOldFile } = results;
      if (!svc || !curl || !curlOldFile) throw new Error(`round ${round + 1} missed a step`);
      measured.push({ order, svc, curl, curlOldFile });
    }

    // The bucket service: its own data folder and database, its packages in s3rver's bucket.
    Object.assign(process.env, s3rverCredentials);
    bucket = await startS3rver();
    const inBucket = await startService(join(scratch, 'data-bucket'), bucket.env);
    bucketService = inBucket;
    const bucketToken = await signUpWithKey(inBucket.url, key.publicLine);
    const bucketRounds: BucketRound[] = [];
    for (let round = 0; round < rounds; round++) {
      const bucketFirst = round % 2 === 0;
      process.stderr.write(
        `bucket round ${round + 1}/${rounds}: ${bucketFirst ? 'bucket, filesystem' : 'filesystem, bucket'}\n`,
      );
      const toBucket = () => packThenCurl(inBucket, bucketToken, appDir);
      const toFilesystem = () => packThenCurl(running, token, appDir);
      const first = await (bucketFirst ? toBucket() : toFilesystem());
      const second = await (bucketFirst ? toFilesystem() : toBucket());
      const directMibPerSecond = await packThenUploadDirect(bucket, appDir, `direct/${round}`);
      bucketRounds.push({
        bucketFirst,
        bucket: bucketFirst ? first : second,
        filesystem: bucketFirst ? second : first,
        directMibPerSecond,
      });
    }
    report(measured, bucketRounds, idle.peakMib, packedAtStart.size / mib);
  } finally {
    await service?.stop();
    await bucketService?.stop();
    await bucket?.stop();
    await oldPackage?.remove();
    await rm(scratch, { recursive: true, force: true });
  }
}

// A measurement, not a test: exit 0 whatever the figures; non-zero only when the run itself failed.
await main().catch((error: unknown) => {
  process.stderr.write(`bench:upload failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
