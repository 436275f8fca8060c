/**
 * Uploads cut by the service going away, with the service as `npm start` runs it in a process of
 * its own: stopped with SIGTERM while a client stalls mid-upload, or killed outright.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, test } from 'vitest';
import { signUpDeveloper } from './support/accounts.ts';
import { call, eventually, putPackage, sameUrlOn, startRequest } from './support/http.ts';
import { makePackage, manifestFor, type TestPackage } from './support/packages.ts';
import { exitOf, type ServiceProcess, startServiceProcess } from './support/service-process.ts';

const partialFiles = (dataDir: string) =>
  readdirSync(join(dataDir, 'blobs', 'incoming')).filter((name) => name.endsWith('.part'));

/** Asks for an upload URL and starts a PUT that sends half the package, then stalls. */
async function stallHalfwayThroughAnUpload(service: ServiceProcess, dataDir: string, pkg: TestPackage) {
  const developer = await signUpDeveloper(service.url);
  const target = await call(service.url, 'POST', '/api/v1/mini-apps/upload-url', {
    token: developer.token,
    body: { app_id: pkg.appId, version: pkg.version, size: pkg.size, sha256: pkg.sha256 },
  });
  assert.equal(target.status, 201, JSON.stringify(target.body));
  const { host, pathname, search } = new URL(target.body.upload_url);
  const stalled = startRequest(
    service.url,
    `PUT ${pathname}${search} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/gzip\r\n` +
      `Content-Length: ${pkg.size}\r\nConnection: close\r\n\r\n`,
  );
  stalled.send(pkg.bytes.subarray(0, Math.floor(pkg.size / 2)));
  await eventually('the upload is under way', () => partialFiles(dataDir).length === 1);
  const second = await putPackage(target.body.upload_url, pkg.bytes);
  assert.equal(second.body?.code, 'upload_in_progress', 'while it lasts, the URL is held');
  return { uploadUrl: target.body.upload_url as string, stalled };
}

/** A service on `dataDir` killed (SIGKILL) halfway through an upload of `pkg`: the upload's URL. */
async function killMidUpload(
  dataDir: string,
  pkg: TestPackage,
  env: Record<string, string>,
): Promise<string> {
  const service = await startServiceProcess({ dataDir, env });
  const { uploadUrl, stalled } = await stallHalfwayThroughAnUpload(service, dataDir, pkg);
  const exited = exitOf(service.child);
  service.child.kill('SIGKILL');
  await exited;
  stalled.abandon();
  return uploadUrl;
}

/** `promise`, or a failure naming `what` after `ms`. */
function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

describe('uploads interrupted by the service stopping', () => {
  const dataDirs: string[] = [];
  const freshDataDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-interrupted-'));
    dataDirs.push(dir);
    return dir;
  };
  afterAll(() => {
    for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
  });

  test('when SIGTERM arrives while an upload stalls halfway then the process exits after the grace, the client hears 503, and the URL works after restart', async () => {
    const dataDir = freshDataDir();
    const pkg = makePackage(manifestFor('com.example.sigterm', '1.0.0'));
    const service = await startServiceProcess({ dataDir, env: { SVC_SHUTDOWN_GRACE: '1s' } });
    const { uploadUrl, stalled } = await stallHalfwayThroughAnUpload(service, dataDir, pkg);

    const exited = exitOf(service.child);
    service.child.kill('SIGTERM');
    try {
      // The grace is 1 s; before, the process waited for the client as long as the URL lived (15 min).
      assert.equal(await within(10_000, 'stopping', exited), 0);
    } finally {
      if (service.child.exitCode === null) service.child.kill('SIGKILL');
      stalled.abandon();
    }
    const answer = await stalled.reply;
    assert.equal(answer.status, 503, answer.body);
    assert.equal(JSON.parse(answer.body).code, 'shutting_down');
    assert.deepEqual(partialFiles(dataDir), [], 'the cut upload left no partial file');

    const again = await startServiceProcess({ dataDir });
    try {
      const reply = await putPackage(sameUrlOn(again, uploadUrl), pkg.bytes);
      assert.equal(reply.status, 201, JSON.stringify(reply.body));
    } finally {
      await again.stop();
    }
  });

  test('when the process is killed mid-upload then after restart its partial file is deleted and the URL works again', async () => {
    const dataDir = freshDataDir();
    const pkg = makePackage(manifestFor('com.example.sigkill', '1.0.0'));
    // Held long enough that a loaded machine's second PUT still finds the URL held (1 s was not),
    // and the PUT after the restart keeps its own hold; it lapses about when the restart is done.
    const env = { SVC_UPLOAD_LEASE: '3s' };
    const uploadUrl = await killMidUpload(dataDir, pkg, env);
    assert.equal(partialFiles(dataDir).length, 1, 'the killed process could not clean up');

    const again = await startServiceProcess({ dataDir, env });
    try {
      // The dead receiver's 3 s hold lapses, and the service lets the URL go.
      await eventually('the partial file is deleted', () => partialFiles(dataDir).length === 0);
      const reply = await putPackage(sameUrlOn(again, uploadUrl), pkg.bytes);
      assert.equal(reply.status, 201, JSON.stringify(reply.body));
      assert.deepEqual(partialFiles(dataDir), []);
    } finally {
      await again.stop();
    }
  });

  test('when the process is killed mid-upload then after restart the URL answers 409 upload_in_progress saying until when it is held, with Retry-After', async () => {
    const dataDir = freshDataDir();
    const pkg = makePackage(manifestFor('com.example.held', '1.0.0'));
    const env = { SVC_UPLOAD_LEASE: '60s' };
    const uploadUrl = await killMidUpload(dataDir, pkg, env);

    const again = await startServiceProcess({ dataDir, env });
    try {
      const asked = Date.now();
      const response = await fetch(sameUrlOn(again, uploadUrl), {
        method: 'PUT',
        headers: { 'content-type': 'application/gzip' },
        body: new Uint8Array(pkg.bytes),
      });
      const problem = (await response.json()) as { code: string; detail: string };
      assert.equal(response.status, 409, JSON.stringify(problem));
      assert.equal(problem.code, 'upload_in_progress');
      const retryAfter = Number(response.headers.get('retry-after'));
      assert.ok(
        Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60,
        `Retry-After ${retryAfter}`,
      );
      const heldUntil = /held until (\S+) \((\d+) s from now\)/.exec(problem.detail);
      assert.ok(heldUntil, problem.detail);
      assert.equal(Number(heldUntil[2]), retryAfter, 'the detail and Retry-After agree');
      const until = Date.parse(heldUntil[1] ?? '');
      // The dead receiver's lease: taken at most 60 s before it was asked about.
      assert.ok(
        until > asked && until <= asked + 60_000,
        `${heldUntil[1]} within the lease after ${new Date(asked).toISOString()}`,
      );
    } finally {
      await again.stop();
    }
  });
});
