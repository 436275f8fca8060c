/** `svc_commands_total{name,state}`: each move of a command into a state, on the service's registry. */
import { Counter, type Registry } from 'prom-client';
import type { CommandState } from './command-states.ts';

export interface CommandMetrics {
  /** `count` commands called `name` moved into `state` (made, for `queued`). */
  moved(name: string, state: CommandState, count?: number): void;
}

export function createCommandMetrics(registry: Registry): CommandMetrics {
  const commands = new Counter({
    name: 'svc_commands_total',
    help: 'Commands for cars moving into a state, by command name and state (queued: made; sent: taken by the broker; accepted, completed, failed, rejected: said by the car; expired: not final by its expiry).',
    labelNames: ['name', 'state'] as const,
    registers: [registry],
  });
  return {
    moved(name, state, count = 1) {
      if (count > 0) commands.inc({ name, state }, count);
    },
  };
}
