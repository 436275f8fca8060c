/**
 * createSvcClient against a fetch that answers as the service would (the service itself is in
 * server/test/sdk-client.test.ts): what goes on the wire, and what comes back as models.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import { createSvcClient, DeviceIdError, type SendCommandRequest, SvcProblem } from '../src/index.ts';

interface Scripted {
  status: number;
  body: unknown;
  contentType?: string;
}

function scriptedFetch(...answers: Scripted[]) {
  const requests: { url: string; method: string; headers: Headers; body: unknown }[] = [];
  const fetch = async (input: Request) => {
    const text = await input.text();
    requests.push({
      url: input.url,
      method: input.method,
      headers: input.headers,
      body: text ? JSON.parse(text) : undefined,
    });
    const answer = answers.shift() ?? { status: 500, body: 'no answer scripted', contentType: 'text/plain' };
    const contentType =
      answer.contentType ?? (answer.status >= 400 ? 'application/problem+json' : 'application/json');
    const body = typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body);
    return new Response(body, { status: answer.status, headers: { 'content-type': contentType } });
  };
  return { requests, fetch: fetch as unknown as typeof globalThis.fetch };
}

const deviceId = 'brand_a:1HGCM82633A004352';

const carStatusWire = {
  device_id: deviceId,
  brand: 'brand_a',
  online: true,
  last_seen: '2026-11-21T10:06:00Z',
  state: { ignition: false, doors_locked: true, fuel_level_pct: 41 },
  reported_at: '2026-11-21T10:05:00Z',
};

const commandWire = {
  command_id: '0b8e7c1e-3f5a-4c2d-9a41-6f0d2b7c9e15',
  device_id: deviceId,
  brand: 'brand_a',
  name: 'app.install',
  args: { app_id: 'com.example.parking', version: '1.4.2' },
  state: 'queued',
  detail: null,
  created_at: '2026-11-23T09:30:00Z',
  updated_at: '2026-11-23T09:30:00Z',
  expires_at: '2026-11-23T10:30:00Z',
};

const problem = (status: number, code: string, detail: string) => ({
  type: `/problems/${code}`,
  title: 'Problem',
  status,
  detail,
  code,
  instance: '/api/v1/cars/x/status',
});

describe('createSvcClient', () => {
  test('when a car status is read then it comes back camelCase, the state keys as the car sent them', async () => {
    const { requests, fetch } = scriptedFetch({ status: 200, body: carStatusWire });
    const svc = createSvcClient({ baseUrl: 'https://svc.example.com/', token: 'svc_token', fetch });
    const status = await svc.cars.status(deviceId);
    assert.deepEqual(status, {
      deviceId,
      brand: 'brand_a',
      online: true,
      lastSeen: '2026-11-21T10:06:00Z',
      state: { ignition: false, doors_locked: true, fuel_level_pct: 41 },
      reportedAt: '2026-11-21T10:05:00Z',
    });
    assert.equal(requests[0]?.url, 'https://svc.example.com/api/v1/cars/brand_a%3A1HGCM82633A004352/status');
    assert.equal(requests[0]?.headers.get('authorization'), 'Bearer svc_token');
  });

  test('when the base URL is the API line npm start prints (ending in /api/v1) then the calls still reach the service', async () => {
    for (const baseUrl of [
      'http://127.0.0.1:8080/api/v1',
      'http://127.0.0.1:8080/api/v1/',
      'http://127.0.0.1:8080',
    ]) {
      const { requests, fetch } = scriptedFetch({ status: 200, body: carStatusWire });
      const svc = createSvcClient({ baseUrl, token: 'svc_token', fetch });
      await svc.cars.status(deviceId);
      assert.equal(
        requests[0]?.url,
        'http://127.0.0.1:8080/api/v1/cars/brand_a%3A1HGCM82633A004352/status',
        baseUrl,
      );
    }
    // A service under a path of its own keeps that path.
    const { requests, fetch } = scriptedFetch({ status: 200, body: carStatusWire });
    await createSvcClient({ baseUrl: 'https://example.com/svc/api/v1', fetch }).cars.status(deviceId);
    assert.equal(requests[0]?.url, 'https://example.com/svc/api/v1/cars/brand_a%3A1HGCM82633A004352/status');
  });

  test('when a device id holds URL syntax then it stays one path segment', async () => {
    const { requests, fetch } = scriptedFetch(
      { status: 200, body: { ...carStatusWire, device_id: 'brand_b:a/b?c#d' } },
      { status: 200, body: commandWire },
    );
    const svc = createSvcClient({ baseUrl: 'https://svc.example.com', fetch });
    await svc.cars.status('brand_b:a/b?c#d');
    await svc.cars.commands.get('brand_b:../..', '../x');
    assert.equal(requests[0]?.url, 'https://svc.example.com/api/v1/cars/brand_b%3Aa%2Fb%3Fc%23d/status');
    assert.equal(requests[1]?.url, 'https://svc.example.com/api/v1/cars/brand_b%3A..%2F../commands/..%2Fx');
  });

  test('when a device id has no brand prefix (or is "..") then nothing is sent and a DeviceIdError says why', async () => {
    const { requests, fetch } = scriptedFetch();
    const svc = createSvcClient({ baseUrl: 'https://svc.example.com', fetch });
    for (const id of ['1HGCM82633A004352', '..', ':x', '', 42 as unknown as string]) {
      await assert.rejects(svc.cars.status(id), (error: unknown) => {
        assert.ok(error instanceof DeviceIdError);
        assert.equal(error.code, 'missing_prefix');
        return true;
      });
    }
    for (const commandId of ['', '.', '..']) {
      await assert.rejects(svc.cars.commands.get(deviceId, commandId), TypeError);
    }
    assert.equal(requests.length, 0);
  });

  test('when the service refuses then a SvcProblem carries its code, status and detail', async () => {
    const { fetch } = scriptedFetch({
      status: 404,
      body: problem(404, 'car_not_found', 'no car brand_a:1HGCM82633A004352 that you may see'),
    });
    const svc = createSvcClient({ baseUrl: 'https://svc.example.com', fetch });
    const error = await svc.cars.location(deviceId).catch((caught: unknown) => caught);
    assert.ok(error instanceof SvcProblem);
    assert.ok(error instanceof Error);
    assert.equal(error.code, 'car_not_found');
    assert.equal(error.status, 404);
    assert.equal(error.detail, 'no car brand_a:1HGCM82633A004352 that you may see');
    assert.equal(error.message, error.detail);
    assert.deepEqual(error.errors, []);
  });

  test('when something that is not the service answers then a SvcProblem unexpected_response says so', async () => {
    const { fetch } = scriptedFetch({
      status: 502,
      body: '<html>Bad Gateway</html>',
      contentType: 'text/html',
    });
    const svc = createSvcClient({ baseUrl: 'https://svc.example.com', fetch });
    const error = await svc.me().catch((caught: unknown) => caught);
    assert.ok(error instanceof SvcProblem);
    assert.equal(error.code, 'unexpected_response');
    assert.equal(error.status, 502);
    assert.match(error.detail, /502 with text\/html, not a problem: check that baseUrl/);
  });

  test('when a command is sent then the wire gets snake_case and the key, and the model keeps args as sent', async () => {
    const { requests, fetch } = scriptedFetch({ status: 202, body: commandWire });
    const svc = createSvcClient({ baseUrl: 'https://svc.example.com', token: () => 'svc_later', fetch });
    const command = await svc.cars.commands.send(deviceId, {
      name: 'app.install',
      args: { app_id: 'com.example.parking', version: '1.4.2' },
      ttlSeconds: 3600,
      brand: 'brand_a',
      idempotencyKey: 'retry-1',
    });
    assert.equal(requests[0]?.method, 'POST');
    assert.deepEqual(requests[0]?.body, {
      name: 'app.install',
      args: { app_id: 'com.example.parking', version: '1.4.2' },
      ttl_seconds: 3600,
      brand: 'brand_a',
    });
    assert.equal(requests[0]?.headers.get('idempotency-key'), 'retry-1');
    assert.equal(requests[0]?.headers.get('authorization'), 'Bearer svc_later');
    assert.equal(command.commandId, commandWire.command_id);
    assert.equal(command.expiresAt, commandWire.expires_at);
    assert.deepEqual(command.args, { app_id: 'com.example.parking', version: '1.4.2' });
  });

  test('when a command is written then its name and arguments are typed by the contract (npm run typecheck)', () => {
    const accepted: SendCommandRequest[] = [
      { name: 'doors.lock' },
      { name: 'doors.unlock', args: {}, ttlSeconds: 60 },
      { name: 'app.install', args: { app_id: 'com.example.parking' } },
      { name: 'app.install', args: { app_id: 'com.example.parking', version: '1.4.2' } },
      { name: 'app.uninstall', args: { app_id: 'com.example.parking' }, idempotencyKey: 'k' },
    ];
    const refused: SendCommandRequest[] = [
      // @ts-expect-error a name the contract does not have
      { name: 'doors.lok' },
      // @ts-expect-error another command's arguments
      { name: 'doors.lock', args: { app_id: 'com.example.parking' } },
      // @ts-expect-error app.install names the app
      { name: 'app.install', args: { version: '1.4.2' } },
      // @ts-expect-error and takes arguments
      { name: 'app.install' },
      // @ts-expect-error only the service sends it
      { name: 'pairing.show_code', args: { code: '40172958' } },
    ];
    assert.equal(accepted.length + refused.length, 10);
  });

  test('when commands are listed then cursor and limit go in the query and the page comes back as models', async () => {
    const { requests, fetch } = scriptedFetch({
      status: 200,
      body: { commands: [commandWire], next_cursor: 'c2' },
    });
    const svc = createSvcClient({ baseUrl: 'https://svc.example.com', fetch });
    const page = await svc.cars.commands.list(deviceId, { cursor: 'c1', limit: 10 });
    assert.equal(
      requests[0]?.url,
      'https://svc.example.com/api/v1/cars/brand_a%3A1HGCM82633A004352/commands?cursor=c1&limit=10',
    );
    assert.equal(page.nextCursor, 'c2');
    assert.equal(page.commands[0]?.deviceId, deviceId);
  });

  test('when pairing starts then the code is sent (202); when the code is given then the car is paired (200)', async () => {
    const { requests, fetch } = scriptedFetch(
      {
        status: 202,
        body: {
          device_id: deviceId,
          brand: 'brand_a',
          command_id: commandWire.command_id,
          expires_at: '2026-11-23T09:35:00Z',
        },
      },
      {
        status: 200,
        body: {
          device_id: deviceId,
          brand: 'brand_a',
          owner_id: '0b9d6f4e-1c2a-4e5b-8f3d-7a6c5b4e3d21',
          paired_at: '2026-11-23T09:31:00Z',
          provisioned_at: '2026-11-20T08:00:00Z',
        },
      },
    );
    const svc = createSvcClient({ baseUrl: 'https://svc.example.com', fetch });
    const asked = await svc.cars.pair(deviceId);
    assert.equal(asked.outcome, 'code_sent');
    assert.equal(asked.outcome === 'code_sent' && asked.pairingCode.commandId, commandWire.command_id);
    const paired = await svc.cars.pair(deviceId, { code: '4017 2958' });
    assert.equal(paired.outcome === 'paired' && paired.car.ownerId, '0b9d6f4e-1c2a-4e5b-8f3d-7a6c5b4e3d21');
    assert.deepEqual(requests[0]?.body, {});
    assert.deepEqual(requests[1]?.body, { code: '4017 2958' });
  });

  test('when an identity token is asked for then app_id and locale go on the wire', async () => {
    const { requests, fetch } = scriptedFetch({
      status: 201,
      body: { token: 'a.b.c', expires_at: '2026-11-21T10:15:00Z' },
    });
    const svc = createSvcClient({ baseUrl: 'https://svc.example.com', fetch });
    const token = await svc.cars.identityToken(deviceId, { appId: 'com.example.hello-car', locale: 'en-GB' });
    assert.deepEqual(token, { token: 'a.b.c', expiresAt: '2026-11-21T10:15:00Z' });
    assert.deepEqual(requests[0]?.body, { app_id: 'com.example.hello-car', locale: 'en-GB' });
    assert.match(requests[0]?.url ?? '', /\/cars\/brand_a%3A1HGCM82633A004352\/identity-token$/);
  });

  test('when the raw client is used then it speaks the wire form', async () => {
    const { fetch } = scriptedFetch({ status: 200, body: carStatusWire });
    const svc = createSvcClient({ baseUrl: 'https://svc.example.com', fetch });
    const { data } = await svc.raw.GET('/api/v1/cars/{device_id}/status', {
      params: { path: { device_id: deviceId } },
    });
    assert.equal(data?.device_id, deviceId);
  });
});
