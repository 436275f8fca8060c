/**
 * @svc/sdk as a mini-app developer gets it: `npm pack`, installed from the tarball into an empty
 * project outside this repository, and used there with plain `node` (no TypeScript loader) and
 * `tsc`. vitest's global setup built client/dist first.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { exportedFiles, sdkRoot } from '../../scripts/build-sdk.ts';
import { repoRoot } from '../../scripts/repo-root.ts';
import { signUpAdmin, signUpDeveloper } from '../../server/test/support/accounts.ts';
import { carPath, provisionCar } from '../../server/test/support/cars.ts';
import { publishMiniApp } from '../../server/test/support/commands.ts';
import { call } from '../../server/test/support/http.ts';
import { startTestService } from '../../server/test/support/service.ts';
import { appId, deviceId } from './support/identity-keys.ts';

const adminEmail = 'package-admin@example.com';

const run = promisify(execFile);
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

interface PackedFile {
  path: string;
}

describe('@svc/sdk, packed and installed', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'svc-sdk-package-'));
  const project = join(scratch, 'app');
  let packed: PackedFile[] = [];
  let tarballName = '';

  beforeAll(async () => {
    // The build is the global setup's; packing must not rebuild dist/ under the other test files.
    const { stdout } = await run(npm, ['pack', '--json', '--ignore-scripts', '--pack-destination', scratch], {
      cwd: sdkRoot,
    });
    const [info] = JSON.parse(stdout) as [{ filename: string; files: PackedFile[] }];
    packed = info.files;
    tarballName = info.filename;
    const tarball = join(scratch, info.filename);

    mkdirSync(project);
    writeFileSync(
      join(project, 'package.json'),
      `${JSON.stringify({ name: 'hello-car-backend', private: true, type: 'module' }, null, 2)}\n`,
    );
    // jose and openapi-fetch come from npm's cache when this machine installed them before.
    await run(npm, ['install', tarball, '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts'], {
      cwd: project,
    });
  });
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  test('when packed then it writes the file the docs tell developers to install', () => {
    // The package is not on the public registry: the docs name the tarball, which a new version renames.
    for (const page of ['docs/mini-apps.md', 'client/README.md', 'examples/hello-car/README.md']) {
      const text = readFileSync(join(repoRoot, page), 'utf8');
      const named = new Set(text.match(/svc-sdk-[\w.-]+?\.tgz/g) ?? []);
      assert.deepEqual([...named], [tarballName], `${page} names ${[...named].join(', ') || 'no tarball'}`);
    }
  });

  test('when packed then it holds the built package and nothing of the repository', () => {
    const paths = packed.map((file) => file.path).sort();
    assert.ok(paths.includes('package.json'));
    assert.ok(paths.includes('README.md'));
    for (const file of exportedFiles()) assert.ok(paths.includes(file.replace(/^\.\//, '')), `no ${file}`);
    assert.ok(paths.includes('dist/generated/sdk-models.js'));
    assert.ok(paths.includes('dist/generated/sdk-models.d.ts'));
    assert.deepEqual(
      paths.filter((path) => !path.startsWith('dist/') && path !== 'package.json' && path !== 'README.md'),
      [],
    );
    assert.deepEqual(
      paths.filter(
        (path) => /\.test\.|\.tsbuildinfo$|(^|\/)src\/.*\.ts$/.test(path) && !path.endsWith('.d.ts'),
      ),
      [],
    );
    // No file of the package reaches outside it: the generated modules are compiled in.
    const installed = join(project, 'node_modules/@svc/sdk');
    for (const path of paths.filter((p) => p.endsWith('.js'))) {
      const text = readFileSync(join(installed, path), 'utf8');
      for (const [, specifier] of text.matchAll(/from\s+"(\.[^"]+)"/g)) {
        const target = join(installed, path, '..', specifier as string);
        assert.ok(target.startsWith(`${installed}/`), `${path} imports ${specifier}, outside the package`);
        assert.ok(
          paths.includes(target.slice(installed.length + 1)),
          `${path} imports ${specifier}, not packed`,
        );
      }
    }
  });

  test('when plain node imports it then it validates a device id and verifies a token from a running service', async () => {
    // The service as it runs, on real time: the token is checked by this machine's clock.
    const service = await startTestService({ SVC_ADMIN_EMAILS: adminEmail }, { clockRuns: true });
    try {
      const admin = await signUpAdmin(service, adminEmail);
      const developer = await signUpDeveloper(service.url);
      await provisionCar(service, admin, deviceId);
      await publishMiniApp(service.url, developer, admin, appId, '1.0.0');
      const issued = await call(service.url, 'POST', carPath(deviceId, 'identity-token'), {
        token: admin.token,
        body: { app_id: appId, locale: 'en-GB' },
      });
      assert.equal(issued.status, 201, JSON.stringify(issued.body));
      writeFileSync(
        join(project, 'check.mjs'),
        `import { validateDeviceId, redactDeviceId, verifyIdentityToken, IdentityTokenError, createSvcClient } from '@svc/sdk';
const [serviceUrl, token] = process.argv.slice(2);
const jwksUrl = new URL('/.well-known/jwks.json', serviceUrl).href;
const parts = validateDeviceId('brand_a:1HGCM82633A004352');
const identity = await verifyIdentityToken(token, { jwksUrl, audience: ${JSON.stringify(appId)}, issuer: serviceUrl });
const refusal = await verifyIdentityToken(token, { jwksUrl, audience: 'com.example.other' }).catch((error) => error);
const svc = createSvcClient({ baseUrl: serviceUrl });
console.log(JSON.stringify({
  parts,
  redacted: redactDeviceId(identity.deviceId),
  identity,
  refusal: refusal instanceof IdentityTokenError ? refusal.code : String(refusal),
  client: typeof svc.cars.status,
}));
`,
      );
      const { stdout } = await run(process.execPath, ['check.mjs', service.url, issued.body.token], {
        cwd: project,
      });
      const result = JSON.parse(stdout);
      assert.deepEqual(result.parts, { brand: 'brand_a', nativeId: '1HGCM82633A004352' });
      assert.equal(result.redacted, '*********************4352');
      assert.equal(result.identity.sub, admin.accountId);
      assert.equal(result.identity.deviceId, deviceId);
      assert.equal(result.identity.brand, 'brand_a');
      assert.equal(result.identity.appId, appId);
      assert.equal(result.identity.expiresAt, issued.body.expires_at);
      assert.equal(result.refusal, 'wrong_audience');
      assert.equal(result.client, 'function');
    } finally {
      await service.stop();
    }
  });

  test('when tsc checks code that uses it then CarStatus has deviceId and no device_id', async () => {
    writeFileSync(
      join(project, 'tsconfig.json'),
      `${JSON.stringify(
        {
          compilerOptions: {
            target: 'ES2022',
            module: 'NodeNext',
            moduleResolution: 'NodeNext',
            lib: ['ES2022', 'DOM'],
            types: [],
            strict: true,
            noEmit: true,
            // The package's own declarations are checked too.
            skipLibCheck: false,
          },
          include: ['use.ts'],
        },
        null,
        2,
      )}\n`,
    );
    writeFileSync(
      join(project, 'use.ts'),
      `import { type CarStatus, createSvcClient, type VerifiedIdentity, verifyIdentityToken, toCarStatus } from '@svc/sdk';

export async function show(baseUrl: string, token: string, deviceId: string): Promise<string> {
  const svc = createSvcClient({ baseUrl, token });
  const status: CarStatus = await svc.cars.status(deviceId);
  // @ts-expect-error device_id is the wire name; the model has deviceId
  status.device_id;
  return \`\${status.deviceId} (\${status.brand}) last seen \${status.lastSeen ?? 'never'}\`;
}

export async function who(token: string): Promise<VerifiedIdentity> {
  return verifyIdentityToken(token, { jwksUrl: 'https://svc.example.com/.well-known/jwks.json', audience: 'com.example.hello-car' });
}

export const converted: string = toCarStatus({
  device_id: 'brand_a:1HGCM82633A004352',
  brand: 'brand_a',
  online: true,
  last_seen: null,
  state: { doors_locked: true },
  reported_at: null,
}).deviceId;
`,
    );
    const checked = await run(process.execPath, [tsc, '-p', '.'], { cwd: project }).catch(
      (error: { stdout: string; code: number }) => error,
    );
    assert.equal('code' in checked ? checked.code : 0, 0, 'stdout' in checked ? checked.stdout : '');

    // The same file with the wire name used as a field does not compile.
    writeFileSync(
      join(project, 'use.ts'),
      readFileSync(join(project, 'use.ts'), 'utf8').replace(
        '  // @ts-expect-error device_id is the wire name; the model has deviceId\n',
        '',
      ),
    );
    const refused = await run(process.execPath, [tsc, '-p', '.'], { cwd: project }).catch(
      (error: { stdout: string }) => error,
    );
    assert.match(String(refused.stdout), /Property 'device_id' does not exist on type 'CarStatus'/);
  });
});
