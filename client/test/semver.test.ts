import assert from 'node:assert/strict';
import { test } from 'vitest';
import { compareVersions, parseVersion } from '../src/index.ts';

test('when versions are compared then precedence follows semver §11', () => {
  // Each is lower than the next (the example chain of semver §11, then numeric and length cases).
  const ascending = [
    '1.0.0-alpha',
    '1.0.0-alpha.1',
    '1.0.0-alpha.beta',
    '1.0.0-beta',
    '1.0.0-beta.2',
    '1.0.0-beta.11',
    '1.0.0-rc.1',
    '1.0.0',
    '1.0.1',
    '1.2.0',
    '1.10.0',
    '2.0.0',
    '5.6.0',
    '5.7.0',
    '5.8.0-beta.1',
    '5.8.0',
    '10.0.0',
    '9007199254740993.0.0',
  ];
  for (const [i, lower] of ascending.entries()) {
    for (const higher of ascending.slice(i + 1)) {
      assert.ok(compareVersions(lower, higher) < 0, `${lower} < ${higher}`);
      assert.ok(compareVersions(higher, lower) > 0, `${higher} > ${lower}`);
    }
    assert.equal(compareVersions(lower, lower), 0, `${lower} = ${lower}`);
  }
  assert.equal(compareVersions('1.0.0+build.1', '1.0.0+build.2'), 0, 'build metadata has no precedence');
  assert.equal(
    compareVersions('1.0.0-1', '1.0.0-a') < 0,
    true,
    'numeric identifiers sort before alphanumeric',
  );
  assert.equal(
    compareVersions('1.0.0-Z', '1.0.0-a') < 0,
    true,
    'alphanumeric identifiers compare in ASCII order',
  );
  for (const invalid of ['1.0', '01.0.0', '1.0.0-01', 'v1.0.0', '1.0.0-', 'latest']) {
    assert.throws(() => compareVersions(invalid, '1.0.0'), /not a semantic version/, invalid);
  }
});

test('when a version is parsed then its parts come back, and a non-version is undefined', () => {
  assert.deepEqual(parseVersion('1.2.3-beta.1+build'), {
    major: '1',
    minor: '2',
    patch: '3',
    prerelease: ['beta', '1'],
  });
  assert.equal(parseVersion('1.2'), undefined);
});
