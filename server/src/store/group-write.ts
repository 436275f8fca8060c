/**
 * Group commit for the bridge's writes (status reports, presence): what is asked while one write
 * is on its way to the store goes together in the next, as one statement, and each caller learns
 * what became of its own item once that statement commits. At a trickle each item is written at
 * once, alone; under load the writes grow instead of queueing one round trip per message, so the
 * store's round trip no longer paces every car's stream (bench:ingest, docs/adr/0054).
 *
 * Items of one key (one car's) go in one statement at most one at a time, since a statement may
 * change a row once: a car's second report of a group goes in a second statement, after the first,
 * so that each is written as if alone, in the order it arrived.
 *
 * A write the store refuses for an item's content (a constraint, a value it cannot hold) is not
 * allowed to cost the other items theirs: the items are then written one by one, and only the
 * refused one fails. A write that finds the store unavailable fails every item with that error,
 * for its caller to wait out (store/outage.ts) and ask again.
 */
import { storeUnavailableReason } from './unavailable.ts';

export interface GroupWriteOptions<Item> {
  /** The most items one write takes; the rest go in the next. */
  maxItems: number;
  /** What a statement may hold one item of at most: the row the item changes. */
  key(item: Item): string;
}

/** Writes `items` (of distinct keys) in one statement and answers for each, in the same order. */
export type WriteItems<Item, Result> = (items: Item[]) => Promise<Result[]>;

interface Waiting<Item, Result> {
  item: Item;
  resolve(result: Result): void;
  reject(error: unknown): void;
}

/** `group` as successive rounds, each holding one item of a key at most, in the order they came. */
function inRounds<T>(group: T[], key: (entry: T) => string): T[][] {
  const rounds: T[][] = [];
  const seen = new Map<string, number>();
  for (const entry of group) {
    const round = seen.get(key(entry)) ?? 0;
    seen.set(key(entry), round + 1);
    const into = rounds[round] ?? [];
    into.push(entry);
    rounds[round] = into;
  }
  return rounds;
}

export function createGroupWrite<Item, Result>(
  write: WriteItems<Item, Result>,
  options: GroupWriteOptions<Item>,
) {
  const waiting: Waiting<Item, Result>[] = [];
  /** Set while a write is on its way, or about to start. */
  let busy = false;

  async function writeGroup(group: Waiting<Item, Result>[]): Promise<void> {
    try {
      const results = await write(group.map((entry) => entry.item));
      for (const [index, entry] of group.entries()) entry.resolve(results[index] as Result);
    } catch (error) {
      if (group.length === 1 || storeUnavailableReason(error) !== undefined) {
        for (const entry of group) entry.reject(error);
        return;
      }
      // One item's content was refused: alone, each item meets only its own fate.
      for (const entry of group) await writeGroup([entry]);
    }
  }

  async function drain(): Promise<void> {
    while (waiting.length > 0) {
      const group = waiting.splice(0, options.maxItems);
      for (const round of inRounds(group, (entry) => options.key(entry.item))) await writeGroup(round);
    }
    busy = false;
  }

  return {
    /** Resolves with what the store said of `item`, once the write that took it committed. */
    add(item: Item): Promise<Result> {
      return new Promise<Result>((resolve, reject) => {
        waiting.push({ item, resolve, reject });
        if (busy) return;
        busy = true;
        // The messages that arrived with this one (the same read from the broker) join it.
        setImmediate(() => void drain());
      });
    },
  };
}

export type GroupWrite<Item, Result> = ReturnType<typeof createGroupWrite<Item, Result>>;
