import assert from 'node:assert/strict';
import { test } from 'vitest';
import { call } from './support/http.ts';
import { startTestService } from './support/service.ts';

test('when the store stops answering then /readyz is 503 naming it, while /healthz stays ok', async () => {
  const service = await startTestService();
  try {
    assert.equal((await call(service.url, 'GET', '/readyz')).status, 200);
    await service.store.db.destroy();
    const readiness = await call(service.url, 'GET', '/readyz');
    assert.equal(readiness.status, 503);
    assert.deepEqual(readiness.body, {
      status: 'not_ready',
      checks: { store: 'failing', key_value_store: 'failing', mqtt_bridge: 'ok' },
    });
    assert.equal((await call(service.url, 'GET', '/healthz')).status, 200);
  } finally {
    await service.app.stop();
    await service.store.close().catch(() => {});
  }
});
