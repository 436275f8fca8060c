/** Guards the v4 hard cutover: no name removed with v3 may come back in the contract, generated code or packages. */
import assert from 'node:assert/strict';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { brands } from '../../generated/brands.ts';
import { repoRoot } from '../repo-root.ts';

const searchedFolders = ['openapi', 'asyncapi', 'generated', 'client', 'ssh', 'server', 'cli'];

const skippedDirectories = new Set(['node_modules', 'dist', '.git']);

const thisFile = fileURLToPath(import.meta.url);

/** The single-brand word of v3, which named its device ids before brands existed. */
const singleBrandWord = ['v', 'in'].join('');

interface V3Name {
  /** The name as v3 spelled it, for the report. */
  name: string;
  words: string[];
  pattern: RegExp;
}

interface Hit {
  /** Relative to the searched root, with `/` on every platform. */
  file: string;
  line: number;
  column: number;
  found: string;
  name: string;
}

interface SearchResult {
  filesRead: number;
  hits: Hit[];
}

function camel(words: string[]): string {
  return words
    .map((word, index) => (index === 0 ? word : word.charAt(0).toUpperCase() + word.slice(1)))
    .join('');
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * The words may be joined directly (camelCase, any case) or by `_` / `-` (snake, screaming and
 * kebab case), so one pattern catches every spelling of a name. The words are put together at run
 * time, so this file never holds a name it forbids.
 */
function spellings(words: string[]): RegExp {
  return new RegExp(words.map(escapeRegExp).join('[_-]?'), 'gi');
}

/** v3 names by the words they are made of; brand-specific device id names come from the brand registry. */
const v3Names: V3Name[] = [
  { words: ['redact', singleBrandWord] },
  { words: ['call', 'api'] },
  ...[...brands, singleBrandWord].map((owner) => ({ words: [...owner.split('_'), 'device', 'id'] })),
].map(({ words }) => ({ name: camel(words), words, pattern: spellings(words) }));

function findV3Names(text: string, file: string): Hit[] {
  return text.split('\n').flatMap((line, index) =>
    v3Names.flatMap(({ name, pattern }) =>
      Array.from(line.matchAll(pattern), (match) => ({
        file,
        line: index + 1,
        column: match.index + 1,
        found: match[0],
        name,
      })),
    ),
  );
}

/** Reads every text file below `folder` from disk, so new files count before anyone adds them to git. */
function searchFolder(root: string, folder: string): SearchResult {
  const result: SearchResult = { filesRead: 0, hits: [] };
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!skippedDirectories.has(entry.name)) walk(path);
        continue;
      }
      if (!entry.isFile() || path === thisFile) continue;
      const bytes = readFileSync(path);
      if (bytes.includes(0)) continue; // binary: no source name can hide in it
      result.filesRead += 1;
      result.hits.push(...findV3Names(bytes.toString('utf8'), relative(root, path).split(sep).join('/')));
    }
  };
  walk(join(root, folder));
  return result;
}

function report(hits: Hit[]): string {
  return hits.map((hit) => `${hit.file}:${hit.line}:${hit.column}: ${hit.found} (v3 ${hit.name})`).join('\n');
}

describe('removed v3 names', () => {
  const existing = searchedFolders.filter((folder) => existsSync(join(repoRoot, folder)));
  const results = new Map<string, SearchResult>();
  const search = (folder: string): SearchResult => {
    const known = results.get(folder);
    if (known) return known;
    const result = searchFolder(repoRoot, folder);
    results.set(folder, result);
    return result;
  };

  test(`when ${searchedFolders.join('/, ')}/ are searched then no removed v3 name appears`, () => {
    const hits = existing.flatMap((folder) => search(folder).hits);
    assert.equal(
      hits.length,
      0,
      `removed v3 names found; v4 has deviceId / device_id with brand, redactDeviceId and plain fetch():\n${report(hits)}`,
    );
  });

  for (const folder of searchedFolders) {
    test(`when ${folder}/ holds files then the search read some of them`, ({ skip }) => {
      const dir = join(repoRoot, folder);
      if (!existsSync(dir)) return skip(`${folder}/ does not exist`);
      if (readdirSync(dir).every((name) => skippedDirectories.has(name))) return skip(`${folder}/ is empty`);
      assert.ok(search(folder).filesRead > 0, `read no file in ${folder}/`);
    });
  }
});

describe('the v3 name search', () => {
  let root = '';
  const write = (file: string, text: string | Buffer): void => {
    mkdirSync(dirname(join(root, file)), { recursive: true });
    writeFileSync(join(root, file), text);
  };

  const planted = v3Names.flatMap(({ name, words }) => {
    // `before` is text around the name that is not part of it, as in `getOldName` or `--old-name`.
    return [
      { name, before: '', found: name },
      { name, before: 'old', found: camel(['', ...words]) },
      { name, before: '', found: words.join('_') },
      { name, before: '', found: words.join('_').toUpperCase() },
      { name, before: '--', found: words.join('-') },
    ].map((entry) => ({ ...entry, spelling: entry.before + entry.found }));
  });
  const plantedFile = (index: number): string => `src/nested/planted-${index}.ts`;
  const plantedLine = (spelling: string): string => `  const value = ${spelling}();`;
  const v4Names = ['deviceId', 'device_id', 'brand', 'nativeId', 'redactDeviceId', 'formatDeviceId', 'fetch'];

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'no-v3-names-'));
    planted.forEach(({ spelling }, index) => {
      write(plantedFile(index), `// planted\nexport function f() {\n${plantedLine(spelling)}\n}\n`);
    });
    write('src/v4.ts', `${v4Names.map((name) => `export const ${name}Value = '${name}';`).join('\n')}\n`);
    write('node_modules/old/index.js', `${planted[0]?.spelling}\n`);
    write('dist/index.js', `${planted[0]?.spelling}\n`);
    write('src/image.bin', Buffer.concat([Buffer.from([0, 1, 2]), Buffer.from(`${planted[0]?.spelling}`)]));
  });

  afterAll(() => {
    if (root !== '') rmSync(root, { recursive: true, force: true });
  });

  planted.forEach(({ name, before, found, spelling }, index) => {
    test(`when a file holds ${spelling} then the search reports it with file and line as v3 ${name}`, () => {
      const { hits } = searchFolder(root, 'src');
      const column = plantedLine(spelling).indexOf(spelling) + before.length + 1;
      assert.deepEqual(
        hits.filter((hit) => hit.file === plantedFile(index)),
        [{ file: plantedFile(index), line: 3, column, found, name }],
      );
    });
  });

  test('when a file holds only v4 names then the search reports nothing in it', () => {
    const { hits } = searchFolder(root, 'src');
    assert.deepEqual(
      hits.filter((hit) => hit.file === 'src/v4.ts'),
      [],
    );
  });

  test('when the names sit in node_modules, dist or a binary file then the search skips them', () => {
    const searched = searchFolder(root, '.');
    assert.deepEqual(
      searched.hits.filter((hit) => !hit.file.startsWith('src/nested/')),
      [],
    );
    assert.equal(searched.filesRead, planted.length + 1);
  });

  test('when a name is found then the report names file, line and column', () => {
    const { hits } = searchFolder(root, 'src');
    assert.match(
      report(hits),
      new RegExp(`^src/nested/planted-0\\.ts:3:\\d+: ${escapeRegExp(planted[0]?.spelling ?? '')} `),
    );
  });

  test('when this file is searched then it holds none of the names it forbids', () => {
    assert.deepEqual(findV3Names(readFileSync(thisFile, 'utf8'), 'this file'), []);
  });
});
