import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import { createApiClient, isProblem, problemOf, unexpectedResponseCode } from '../src/index.ts';

describe('createApiClient', () => {
  function recordingFetch(status: number, body: unknown) {
    const requests: Request[] = [];
    const fetch = async (input: Request) => {
      requests.push(input);
      return new Response(JSON.stringify(body), {
        status,
        headers: { 'content-type': status >= 400 ? 'application/problem+json' : 'application/json' },
      });
    };
    return { requests, fetch: fetch as unknown as typeof globalThis.fetch };
  }

  test('when a token and user agent are given then every request carries them, read at send time', async () => {
    let token = 'svc_first';
    const { requests, fetch } = recordingFetch(200, { keys: [] });
    const client = createApiClient({
      baseUrl: 'http://svc.test/',
      token: () => token,
      userAgent: 'svc-cli/5.6.0',
      fetch,
    });
    await client.GET('/api/v1/dev/keys');
    token = 'svc_second';
    await client.GET('/api/v1/dev/keys');
    assert.equal(requests[0]?.url, 'http://svc.test/api/v1/dev/keys');
    assert.equal(requests[0]?.headers.get('authorization'), 'Bearer svc_first');
    assert.equal(requests[1]?.headers.get('authorization'), 'Bearer svc_second');
    assert.equal(requests[0]?.headers.get('user-agent'), 'svc-cli/5.6.0');
  });

  test('when the device id goes into a path then it is URL-encoded', async () => {
    const { requests, fetch } = recordingFetch(200, {});
    const client = createApiClient({ baseUrl: 'http://svc.test', fetch });
    await client.GET('/api/v1/cars/{device_id}/status', {
      params: { path: { device_id: 'brand_a:1HGCM82633A004352' } },
    });
    assert.equal(requests[0]?.url, 'http://svc.test/api/v1/cars/brand_a%3A1HGCM82633A004352/status');
    assert.equal(requests[0]?.headers.get('authorization'), null);
  });

  test('when the service answers with a problem then the error is a Problem', async () => {
    const problem = {
      type: '/problems/unauthorized',
      title: 'Unauthorized',
      status: 401,
      detail: 'x',
      code: 'unauthorized',
    };
    const { fetch } = recordingFetch(401, problem);
    const client = createApiClient({ baseUrl: 'http://svc.test', fetch });
    const { error, response } = await client.GET('/api/v1/dev/me');
    assert.equal(response.status, 401);
    assert.ok(isProblem(error));
    assert.equal(isProblem({ message: 'no' }), false);
  });
});

/** The one unwrap of a client call's result the SDK, svc and the console share. */
describe('problemOf', () => {
  function answering(status: number, body: string, contentType: string) {
    const fetch = async () => new Response(body, { status, headers: { 'content-type': contentType } });
    return createApiClient({
      baseUrl: 'http://svc.test',
      fetch: fetch as unknown as typeof globalThis.fetch,
    });
  }

  test('when the service answers 2xx then there is no problem', async () => {
    const client = answering(200, JSON.stringify({ keys: [] }), 'application/json');
    assert.equal(problemOf(await client.GET('/api/v1/dev/keys')), undefined);
  });

  test('when the service refuses with a problem then it is that problem', async () => {
    const problem = {
      type: '/problems/car_not_found',
      title: 'Not found',
      status: 404,
      detail: 'No car brand_a:1HGCM82633A004352 is provisioned, or you may not see it.',
      code: 'car_not_found',
    };
    const client = answering(404, JSON.stringify(problem), 'application/problem+json');
    const result = await client.GET('/api/v1/cars/{device_id}/status', {
      params: { path: { device_id: 'brand_a:1HGCM82633A004352' } },
    });
    assert.deepEqual(problemOf(result), problem);
  });

  test('when something that is not the service answers then the problem is unexpected_response and says so', async () => {
    const client = answering(502, '<html>Bad Gateway</html>', 'text/html');
    const problem = problemOf(await client.GET('/api/v1/dev/me'));
    assert.equal(problem?.code, unexpectedResponseCode);
    assert.equal(problem?.status, 502);
    assert.equal(
      problem?.detail,
      'the service answered 502 with text/html, not a problem: check that baseUrl is the svc service',
    );
  });
});
