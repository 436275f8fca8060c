/**
 * One UUID grammar for every id the service takes (8-4-4-4-12 hex digits, either case, used and
 * answered in lower case): `urn:uuid:…` and other spellings JSON Schema's `uuid` format lets
 * through are a 400, never a 500 from the store, wherever the contract has a uuid; and a HEAD
 * answers what its GET answers, for every GET of the contract.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { readCarMessage } from '../src/mqtt/car-message.ts';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import { carPath, makeOwner, ownerOf, provisionCar } from './support/cars.ts';
import { call, putPackage, type Reply } from './support/http.ts';
import { makePackage, manifestFor } from './support/packages.ts';
import { startTestService, type TestService } from './support/service.ts';

type Node = Record<string, unknown>;
const contract = JSON.parse(readFileSync(new URL('../../generated/openapi.json', import.meta.url), 'utf8'));
const adminEmail = 'uuid-admin@example.com';
/** The contract's own example of a device id: a brand_a VIN. */
const deviceId = 'brand_a:1HGCM82633A004352';

/** Spellings that are not the service's UUID grammar, each built from a real UUID. */
const notUuids = (id: string): Record<string, string> => ({
  'a urn:uuid: prefix': `urn:uuid:${id}`,
  'braces around it': `{${id}}`,
  'no hyphens': id.replaceAll('-', ''),
  'a digit too many': `${id}0`,
  'a letter past f': `${id.slice(0, -1)}g`,
  'plain text': 'not-a-uuid',
});

function resolve(node: unknown): Node {
  let at = node as Node;
  while (typeof at?.$ref === 'string') {
    at = (at.$ref as string)
      .slice(2)
      .split('/')
      .reduce<unknown>((parent, key) => (parent as Node)[key], contract) as Node;
  }
  return at;
}

interface ContractOperation {
  method: string;
  path: string;
  operationId: string;
  parameters: Node[];
  bodySchema?: Node;
  /** The media type of a body that is not JSON (a package). */
  rawType?: string;
}

function operations(): ContractOperation[] {
  return Object.entries(contract.paths as Record<string, Node>).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => method !== 'parameters')
      .map(([method, op]) => {
        const operation = op as Node;
        const parameters = [
          ...((item.parameters as Node[]) ?? []),
          ...((operation.parameters as Node[]) ?? []),
        ].map(resolve);
        const body = operation.requestBody ? resolve(operation.requestBody) : undefined;
        const content = (body?.content as Node | undefined) ?? {};
        const schema = content['application/json'] as Node | undefined;
        return {
          method,
          path,
          operationId: String(operation.operationId),
          parameters,
          bodySchema: schema ? resolve(schema.schema) : undefined,
          rawType: schema ? undefined : Object.keys(content)[0],
        };
      }),
  );
}

const isUuidSchema = (schema: unknown) => resolve(schema)?.format === 'uuid';

// One service for both walks: each path's contract validators are made once, and a HEAD is
// compared with its GET on the same state, whatever the walk before it left.
let service: TestService;
let admin: Developer;

beforeAll(async () => {
  service = await startTestService({ SVC_ADMIN_EMAILS: adminEmail });
  admin = await signUpAdmin(service, adminEmail);
  await provisionCar(service, admin, deviceId);
});
afterAll(async () => {
  await service?.stop();
});

describe('ids in the UUID grammar', () => {
  let owner: Developer;
  let newOwner: Developer;
  let commandId: string;
  let versionId: string;

  const as = (who: Developer | undefined, method: string, path: string, body?: unknown) =>
    call(service.url, method, path, { token: who?.token, body });

  beforeAll(async () => {
    owner = await signUpDeveloper(service.url);
    newOwner = await signUpDeveloper(service.url);
    await makeOwner(service, deviceId, owner);
    const command = await as(owner, 'POST', carPath(deviceId, 'commands'), { name: 'doors.lock' });
    assert.equal(command.status, 202, JSON.stringify(command.body));
    commandId = command.body.command_id;

    const pkg = makePackage(manifestFor('com.example.uuids', '1.0.0'));
    const target = await as(owner, 'POST', '/api/v1/mini-apps/upload-url', {
      app_id: pkg.appId,
      version: pkg.version,
      size: pkg.size,
      sha256: pkg.sha256,
    });
    assert.equal(target.status, 201, JSON.stringify(target.body));
    assert.equal((await putPackage(target.body.upload_url, pkg.bytes)).status, 201);
    const submitted = await as(owner, 'POST', '/api/v1/mini-apps/submit', {
      upload_id: target.body.upload_id,
    });
    assert.equal(submitted.status, 201, JSON.stringify(submitted.body));
    versionId = submitted.body.id;
  });

  function assertInvalidId(reply: Reply, where: string): void {
    assert.equal(reply.status, 400, `${where}: ${JSON.stringify(reply.body)}`);
    assert.match(String(reply.headers['content-type']), /^application\/problem\+json/);
    assert.equal(reply.body.code, 'validation_failed');
    assert.ok(
      reply.body.errors?.some((error: { path: string }) => error.path === where),
      `names ${where}: ${JSON.stringify(reply.body)}`,
    );
  }

  test('when a command is asked for by urn:uuid:<its id> then 400 names command_id; by its id in upper case then it is answered, its id in lower case', async () => {
    const path = (id: string) => `${carPath(deviceId, 'commands')}/${encodeURIComponent(id)}`;
    assertInvalidId(await as(owner, 'GET', path(`urn:uuid:${commandId}`)), '/params/command_id');

    const upper = await as(owner, 'GET', path(commandId.toUpperCase()));
    assert.equal(upper.status, 200, JSON.stringify(upper.body));
    assert.equal(upper.body.command_id, commandId);
    assert.equal(commandId, commandId.toLowerCase());
  });

  test('when a car is transferred to urn:uuid:<an account> then 400 names to_user and the owner stays; to the id in upper case then it moves, stored in lower case', async () => {
    const transfer = (toUser: string) =>
      as(owner, 'POST', carPath(deviceId, 'transfer'), { to_user: toUser });
    assertInvalidId(await transfer(`urn:uuid:${newOwner.accountId}`), '/body/to_user');
    assert.equal(await ownerOf(service, deviceId), owner.accountId);

    const moved = await transfer(newOwner.accountId.toUpperCase());
    assert.equal(moved.status, 200, JSON.stringify(moved.body));
    assert.equal(await ownerOf(service, deviceId), newOwner.accountId);
    assert.equal(moved.body.owner_id, newOwner.accountId, 'answered in lower case');
    await makeOwner(service, deviceId, owner);
  });

  test("when a version's package is asked for by urn:uuid:<its id> then 400 names version_id; by its id in upper case then the package comes", async () => {
    const path = (id: string) => `/api/v1/mini-apps/versions/${encodeURIComponent(id)}/package`;
    assertInvalidId(await as(owner, 'GET', path(`urn:uuid:${versionId}`)), '/params/version_id');
    const upper = await as(owner, 'GET', path(versionId.toUpperCase()));
    assert.equal(upper.status, 200, String(upper.body).slice(0, 200));
    assert.match(String(upper.headers['content-type']), /^application\/gzip/);
  });

  test('when a HEAD names a version or a command by something that is not a uuid then it is the 400 its GET is, with no body', async () => {
    for (const path of [
      '/api/v1/mini-apps/versions/not-a-uuid/package',
      `${carPath(deviceId, 'commands')}/not-a-uuid`,
      `/api/v1/mini-apps/versions/urn%3Auuid%3A${versionId}/package`,
    ]) {
      const head = await as(owner, 'HEAD', path);
      assert.equal(head.status, 400, `HEAD ${path}`);
      assert.match(String(head.headers['content-type']), /^application\/problem\+json/);
      assert.equal(head.body, '');
    }
  });

  test('when a car acknowledges a command by urn:uuid:<its id> then the bridge drops it as invalid; by its id in upper case then it is read in lower case', () => {
    const ack = (id: string) =>
      Buffer.from(
        JSON.stringify({
          command_id: id,
          device_id: 'brand_b:acker',
          brand: 'brand_b',
          outcome: 'completed',
          at: '2026-11-21T09:59:00.000Z',
        }),
      );
    const id = randomUUID();
    const urn = readCarMessage('cars/brand_b/acker/cmd/ack', ack(`urn:uuid:${id}`));
    assert.equal(urn.ok, false);
    assert.equal(!urn.ok && urn.reason, 'invalid_payload');
    const upper = readCarMessage('cars/brand_b/acker/cmd/ack', ack(id.toUpperCase()));
    assert.ok(upper.ok, JSON.stringify(upper));
    assert.equal(upper.ok && upper.message.suffix === 'cmd/ack' && upper.message.payload.command_id, id);
  });

  /** A request to `operation` that the contract would take, apart from the uuid under test. */
  function requestFor(
    operation: ContractOperation,
    uuids: Record<string, string>,
    bodyUuids: Record<string, string>,
  ) {
    let path = operation.path;
    const query = new URLSearchParams();
    for (const parameter of operation.parameters) {
      const name = String(parameter.name);
      const schema = resolve(parameter.schema);
      const value =
        uuids[name] ??
        (name === 'device_id'
          ? deviceId
          : String(
              parameter.example ?? (schema.examples as unknown[] | undefined)?.[0] ?? schema.default ?? 'x',
            ));
      if (parameter.in === 'path') path = path.replace(`{${name}}`, encodeURIComponent(value));
      else if (parameter.in === 'query' && parameter.required) query.set(name, value);
    }
    const example = (operation.bodySchema?.examples as Node[] | undefined)?.[0];
    const body = operation.bodySchema ? { ...example, ...bodyUuids } : undefined;
    return { path: query.size ? `${path}?${query}` : path, body };
  }

  const uuidPlaces = operations().flatMap((operation) => [
    ...operation.parameters
      .filter((parameter) => parameter.in === 'path' && isUuidSchema(parameter.schema))
      .map((parameter) => ({ operation, param: String(parameter.name), field: undefined })),
    ...Object.entries((operation.bodySchema?.properties as Node | undefined) ?? {})
      .filter(([, schema]) => isUuidSchema(schema))
      .map(([field]) => ({ operation, param: undefined, field })),
  ]);

  test('the contract has uuids in paths and bodies for the walk below to try', () => {
    assert.ok(uuidPlaces.some((place) => place.param === 'command_id'));
    assert.ok(uuidPlaces.some((place) => place.param === 'version_id'));
    assert.ok(uuidPlaces.some((place) => place.field === 'to_user'));
    assert.ok(uuidPlaces.length >= 8, `${uuidPlaces.length} places`);
  });

  for (const { operation, param, field } of uuidPlaces) {
    const where = param ? `/params/${param}` : `/body/${field}`;
    test(`when ${operation.method.toUpperCase()} ${operation.path} gets ${where} spelt otherwise than the grammar then 400, and in upper case then what lower case gets`, async () => {
      const id = randomUUID();
      const send = (value: string) => {
        const { path, body } = requestFor(
          operation,
          param ? { [param]: value } : {},
          field ? { [field]: value } : {},
        );
        if (!operation.rawType) return as(admin, operation.method.toUpperCase(), path, body);
        return call(service.url, operation.method.toUpperCase(), path, {
          raw: 'not a package',
          headers: { 'content-type': operation.rawType },
        });
      };
      for (const [what, value] of Object.entries(notUuids(id))) {
        const reply = await send(value);
        assert.equal(reply.status, 400, `${what} (${value}): ${JSON.stringify(reply.body)}`);
        assertInvalidId(reply, where);
      }
      const lower = await send(id);
      const upper = await send(id.toUpperCase());
      assert.ok(lower.status < 500, JSON.stringify(lower.body));
      assert.equal(upper.status, lower.status, JSON.stringify(upper.body));
      assert.equal(upper.body?.code, lower.body?.code);
    });
  }
});

describe('HEAD answers what GET answers', () => {
  /** Headers that differ between any two answers (when, which request) or that only a body has. */
  const perAnswer = new Set(['date', 'x-request-id', 'connection', 'keep-alive', 'transfer-encoding']);
  const comparable = (reply: Reply) =>
    Object.fromEntries(Object.entries(reply.headers).filter(([name]) => !perAnswer.has(name)));

  const gets = operations().filter((operation) => operation.method === 'get');
  /** Each GET with ids that name nothing, with ids that are malformed, and without a credential. */
  const cases = (operation: ContractOperation) => {
    const fill = (value: (parameter: Node) => string) => {
      let path = operation.path;
      for (const parameter of operation.parameters.filter((p) => p.in === 'path')) {
        path = path.replace(`{${parameter.name}}`, encodeURIComponent(value(parameter)));
      }
      return path;
    };
    const named = fill((parameter) => {
      if (parameter.name === 'device_id') return deviceId;
      const schema = resolve(parameter.schema);
      if (schema.format === 'uuid') return randomUUID();
      return String(parameter.example ?? (schema.examples as unknown[] | undefined)?.[0] ?? 'x');
    });
    const malformed = fill((parameter) => (parameter.name === 'device_id' ? 'nope' : 'not-a-uuid'));
    return [
      { what: 'ids that name nothing', path: named, token: admin.token },
      { what: 'malformed ids', path: malformed, token: admin.token },
      { what: 'no credential', path: named, token: undefined },
      { what: 'an unknown query parameter', path: `${named}?surprise=1`, token: admin.token },
    ];
  };

  test('the contract has GET operations with path parameters for the walk below to try', () => {
    assert.ok(gets.filter((operation) => operation.parameters.some((p) => p.in === 'path')).length >= 5);
  });

  for (const operation of gets) {
    test(`when GET ${operation.path} and HEAD of it are asked alike then HEAD has the status and headers of GET, and no body`, async () => {
      for (const { what, path, token } of cases(operation)) {
        const get = await call(service.url, 'GET', path, { token });
        const head = await call(service.url, 'HEAD', path, { token });
        assert.ok(get.status < 500, `GET ${path} (${what}): ${JSON.stringify(get.body)}`);
        assert.equal(head.status, get.status, `HEAD ${path} (${what}): GET said ${JSON.stringify(get.body)}`);
        assert.deepEqual(comparable(head), comparable(get), `HEAD ${path} (${what})`);
        assert.equal(head.body, '', `HEAD ${path} (${what}) has no body`);
      }
    });
  }
});
