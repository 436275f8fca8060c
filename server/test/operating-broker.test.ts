// docs/operating.md, "The broker", gives operators the service's row of the ACL table to paste into
// mosquitto_ctrl: it must be the row the service itself enforces and the tests' Mosquitto uses.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'vitest';
import { serviceRoleAcls } from '../src/broker/mosquitto-dynsec.ts';

const operating = readFileSync(join(import.meta.dirname, '../../docs/operating.md'), 'utf8');

describe('docs/operating.md, the broker', () => {
  test("when an operator pastes the role commands then the role holds exactly the service's row", () => {
    const pasted = [...operating.matchAll(/^ {3}ctl addRoleACL svc-bridge (\w+) '([^']+)' allow$/gm)].map(
      ([, acltype = '', topic = '']) => ({ acltype, topic, allow: true }),
    );
    const byTopic = (a: { topic: string }, b: { topic: string }) => a.topic.localeCompare(b.topic);
    assert.deepEqual(pasted.sort(byTopic), [...serviceRoleAcls].sort(byTopic));
  });
});
