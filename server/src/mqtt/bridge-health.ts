/**
 * Whether this replica's bridge can take what the cars send: its connection up and subscribed, and
 * the commands' connection up. Said by two gauges and by `/readyz` (`checks.mqtt_bridge`), because
 * a bridge that reconnects without working subscriptions stores nothing while the service looks
 * well (a Mosquitto restarted with persistence did that: issue 24).
 */
import { Gauge, type Registry } from 'prom-client';

/** `messages`: the connection the cars' messages arrive on; `commands`: the outbox's. */
export type BridgeConnectionName = 'messages' | 'commands';

export interface BridgeHealth {
  connected(connection: BridgeConnectionName, up: boolean): void;
  /** Every subscription granted on the messages' connection as it stands (false once it drops). */
  subscribed(yes: boolean): void;
  /**
   * Whether the broker refuses the commands the service publishes (MQTT 5 PUBACK 0x87: its
   * account lacks the right); false again once one is taken.
   */
  publishRefused(yes: boolean): void;
  /** Connected, subscribed, the commands' connection up and its commands taken. */
  readonly ok: boolean;
}

export function createBridgeHealth(registry: Registry): BridgeHealth {
  const connectedGauge = new Gauge({
    name: 'svc_mqtt_bridge_connected',
    help: "1 while this replica's bridge connection to the broker is up, by connection (messages: the cars' messages come in; commands: the outbox publishes).",
    labelNames: ['connection'] as const,
    registers: [registry],
  });
  const subscribedGauge = new Gauge({
    name: 'svc_mqtt_bridge_subscribed',
    help: "1 while this replica's bridge is connected and the broker granted all its subscriptions on that connection: 0 means it takes none of the cars' messages.",
    registers: [registry],
  });
  const up: Record<BridgeConnectionName, boolean> = { messages: false, commands: false };
  let subscribed = false;
  let refused = false;
  for (const connection of Object.keys(up) as BridgeConnectionName[]) connectedGauge.set({ connection }, 0);
  subscribedGauge.set(0);
  return {
    connected(connection, isUp) {
      up[connection] = isUp;
      connectedGauge.set({ connection }, isUp ? 1 : 0);
      if (connection === 'messages' && !isUp) this.subscribed(false);
    },
    subscribed(yes) {
      subscribed = yes && up.messages;
      subscribedGauge.set(subscribed ? 1 : 0);
    },
    publishRefused(yes) {
      refused = yes;
    },
    get ok() {
      return subscribed && up.commands && !refused;
    },
  };
}
