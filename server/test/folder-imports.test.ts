/**
 * The service's folders import one way (docs/adr/0048-one-home-for-each-rule-of-the-vehicle-half.md):
 * no two folders of server/src import each other, directly or round a longer loop. Read from the
 * source's own import lines, type imports included.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'vitest';

const source = resolve(dirname(fileURLToPath(import.meta.url)), '../src');

/** Each folder of server/src with the folders its files import from; top-level files are no folder. */
function folderImports(): Map<string, Set<string>> {
  const edges = new Map<string, Set<string>>();
  const folderOf = (file: string) => {
    const [first, ...rest] = relative(source, file).split(sep);
    return rest.length > 0 ? first : undefined;
  };
  for (const entry of readdirSync(source, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
    const file = join(entry.parentPath, entry.name);
    const from = folderOf(file);
    if (!from) continue;
    const text = readFileSync(file, 'utf8');
    for (const [, specifier] of text.matchAll(/from\s+'(\.{1,2}\/[^']+)'/g)) {
      const to = folderOf(resolve(dirname(file), specifier as string));
      if (to && to !== from && resolve(dirname(file), specifier as string).startsWith(source)) {
        edges.set(from, (edges.get(from) ?? new Set()).add(to));
      }
    }
  }
  return edges;
}

/** A loop of folders, each importing the next, if there is one. */
function findLoop(edges: Map<string, Set<string>>): string[] | undefined {
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (folder: string): string[] | undefined => {
    const at = path.indexOf(folder);
    if (at >= 0) return [...path.slice(at), folder];
    if (done.has(folder)) return undefined;
    path.push(folder);
    for (const next of edges.get(folder) ?? []) {
      const loop = visit(next);
      if (loop) return loop;
    }
    path.pop();
    done.add(folder);
    return undefined;
  };
  for (const folder of edges.keys()) {
    const loop = visit(folder);
    if (loop) return loop;
  }
  return undefined;
}

test('when the folders of server/src are read then none imports another that imports it back, however far round', () => {
  const edges = folderImports();
  // The reading finds the arrows there are: the vehicle half's, one way.
  assert.ok(edges.get('mqtt')?.has('cars'), 'mqtt imports cars');
  assert.ok(edges.get('cars')?.has('commands'), 'cars imports commands');
  assert.equal(findLoop(edges), undefined);
});

test('when two folders import each other then the check finds the loop', () => {
  const edges = new Map([
    ['cars', new Set(['commands'])],
    ['commands', new Set(['store', 'cars'])],
  ]);
  assert.deepEqual(findLoop(edges), ['cars', 'commands', 'cars']);
});
