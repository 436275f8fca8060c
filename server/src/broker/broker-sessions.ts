/// <reference path="./aedes-persistence.d.ts" />
/**
 * What the embedded broker keeps of a client's session between its connections (`clean: false`):
 * aedes's in-memory persistence, with two rules of ours.
 *
 * - Only filters the client's row of the ACL table allows are stored. aedes stores a SUBSCRIBE's
 *   whole list of filters once one of them is granted, refused ones included; the broker would then
 *   queue, for a client that is away, every message those match (the whole fleet's for `#`).
 * - Each client's queue of QoS 1 messages (those not yet acknowledged, whether it is away or
 *   behind) is bounded in messages and bytes. As Mosquitto does (`max_queued_messages`), a
 *   message that would go past the bound is not queued, and counted; what is queued stays, in
 *   order. A client away never gets it; one connected gets it once, as it is sent.
 */
import type { Client, Subscription } from 'aedes';
import type { AedesPacket } from 'aedes-packet';
import MemoryPersistence from 'aedes-persistence/asyncPersistence.js';

export interface QueueBound {
  messages: number;
  bytes: number;
}

export type QueueLimit = keyof QueueBound;

interface Queued {
  messages: number;
  bytes: number;
  /** Whether a message was dropped since the queue was last below its bound (logged once). */
  full: boolean;
}

export interface SessionRules {
  /** Whether `client` may subscribe `filter` (the ACL table). */
  mayKeep(client: Client, filter: string): boolean;
  /** The bound of the queue of the client `clientId`. */
  boundOf(clientId: string): QueueBound;
  /** A message was not queued for `clientId`; `first` when its queue had room until now. */
  dropped(clientId: string, limit: QueueLimit, first: boolean): void;
}

/** What a queued message costs: its topic and payload, the part a sender chooses. */
function sizeOf(packet: AedesPacket): number {
  if (!('payload' in packet)) return 0;
  const { topic, payload } = packet;
  return (
    Buffer.byteLength(topic) + (typeof payload === 'string' ? Buffer.byteLength(payload) : payload.length)
  );
}

export class BrokerSessions extends MemoryPersistence {
  private readonly queued = new Map<string, Queued>();
  private readonly rules: SessionRules;

  constructor(rules: SessionRules) {
    super();
    this.rules = rules;
  }

  override addSubscriptions(client: Client, subs: Subscription[]): Promise<void> {
    return super.addSubscriptions(
      client,
      subs.filter((sub) => this.rules.mayKeep(client, sub.topic)),
    );
  }

  override async outgoingEnqueue(sub: { clientId: string }, packet: AedesPacket): Promise<void> {
    if (this.takes(sub.clientId, packet)) await super.outgoingEnqueue(sub, packet);
  }

  override async outgoingEnqueueCombi(subs: { clientId: string }[], packet: AedesPacket): Promise<void> {
    await super.outgoingEnqueueCombi(
      subs.filter((sub) => this.takes(sub.clientId, packet)),
      packet,
    );
  }

  /**
   * aedes numbers each message it writes to a connected client here, and takes a message missing
   * from the queue for a fault that ends the connection. One past the bound is missing on purpose:
   * it goes out once, unqueued (never sent again), and the client stays connected.
   */
  override async outgoingUpdate(client: Client, packet: AedesPacket): Promise<void> {
    try {
      await super.outgoingUpdate(client, packet);
    } catch (error) {
      if (!(error instanceof Error && error.message === 'no such packet')) throw error;
    }
  }

  /** Every message leaves a queue here: acknowledged, or cleared (a session cleaned, a refusal). */
  override async outgoingClearMessageId(client: Client, packet: AedesPacket): Promise<AedesPacket> {
    const removed = await super.outgoingClearMessageId(client, packet);
    const queue = this.queued.get(client.id);
    if (removed && queue) {
      queue.messages -= 1;
      queue.bytes -= sizeOf(removed);
      queue.full = false;
      if (queue.messages <= 0) this.queued.delete(client.id);
    }
    return removed;
  }

  /** Whether the queue of `clientId` has room for `packet`; if so it is counted in. */
  private takes(clientId: string, packet: AedesPacket): boolean {
    const bound = this.rules.boundOf(clientId);
    const queue = this.queued.get(clientId) ?? { messages: 0, bytes: 0, full: false };
    const size = sizeOf(packet);
    const over: QueueLimit | undefined =
      queue.messages + 1 > bound.messages
        ? 'messages'
        : queue.bytes + size > bound.bytes
          ? 'bytes'
          : undefined;
    if (over) {
      this.rules.dropped(clientId, over, !queue.full);
      queue.full = true;
      if (queue.messages > 0) this.queued.set(clientId, queue);
      return false;
    }
    queue.messages += 1;
    queue.bytes += size;
    this.queued.set(clientId, queue);
    return true;
  }
}
