import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { checkEntryName, checkManifest, extensionRoot, isExtensionVersion, reservedTopLevel } from '../../src/domain/extension-manifest.js';
import { ArchiveError, unpackExtension } from '../../src/extensions/extension-archive.js';
import { MARKER_EXTENSION, makeZip, zipWithRawName } from '../helpers/zips.js';

const manifest = (o: Record<string, unknown>) => JSON.stringify({ manifest_version: 3, name: 'x', version: '1.0', ...o });

describe('manifest.json', () => {
  test('manifest_version 3, a name and a version are enough', () => {
    assert.deepEqual(checkManifest(manifest({})), { name: 'x', version: '1.0', manifestVersion: 3 });
    // A byte-order mark is tolerated, as Chrome does.
    assert.equal((checkManifest(`\uFEFF${manifest({})}`) as { name: string }).name, 'x');
  });
  const bad: [string, string, RegExp][] = [
    ['not JSON', '{', /not valid JSON/],
    ['an array', '[]', /JSON object/],
    ['manifest_version 2 (valid, but this Chromium no longer runs it)', manifest({ manifest_version: 2 }), /manifest_version 2 extensions no longer run in this Chromium/],
    ['manifest_version 1', manifest({ manifest_version: 1 }), /manifest_version must be 2 or 3/],
    ['manifest_version "3"', manifest({ manifest_version: '3' }), /manifest_version must be 2 or 3/],
    ['no manifest_version', JSON.stringify({ name: 'x', version: '1' }), /manifest_version/],
    ['no name', JSON.stringify({ manifest_version: 3, version: '1' }), /name must be a non-empty string/],
    ['blank name', manifest({ name: '  ' }), /name must be/],
    ['no version', JSON.stringify({ manifest_version: 3, name: 'x' }), /version must be/],
    ['version with letters', manifest({ version: '1.0beta' }), /version must be/],
    ['five parts', manifest({ version: '1.2.3.4.5' }), /version must be/],
    ['debugger permission', manifest({ permissions: ['tabs', 'debugger'] }), /debugger permission is not allowed/],
    ['proxy permission (optional)', manifest({ optional_permissions: ['proxy'] }), /proxy permission is not allowed/],
    ['permissions not a list', manifest({ permissions: 'tabs' }), /permissions must be an array/],
  ];
  for (const [what, text, re] of bad) {
    test(`refused: ${what}`, () => {
      const r = checkManifest(text);
      assert.ok('error' in r, `accepted ${text}`);
      assert.match(r.error, re);
    });
  }
  test('versions: one to four integers 0..65535 without leading zeros', () => {
    for (const v of ['1', '1.0', '0.0.1', '65535.65535.65535.65535', '10.2.30']) assert.equal(isExtensionVersion(v), true, v);
    for (const v of ['', '1.', '.1', '01', '1.02', '65536', '1.2.3.4.5', 'a', '1..2', '-1']) assert.equal(isExtensionVersion(v), false, v);
  });
});

describe('archive entry names', () => {
  test('plain relative paths pass, directories marked', () => {
    assert.deepEqual(checkEntryName('manifest.json'), { path: 'manifest.json', dir: false });
    assert.deepEqual(checkEntryName('js/a.js'), { path: 'js/a.js', dir: false });
    assert.deepEqual(checkEntryName('icons/'), { path: 'icons', dir: true });
    assert.deepEqual(checkEntryName('a..b/c..'), { path: 'a..b/c..', dir: false });
  });
  const refused: [string, RegExp][] = [
    ['../evil.js', /climbs out/],
    ['a/../../evil.js', /climbs out/],
    ['a/..', /climbs out/],
    ['/etc/passwd', /absolute path/],
    ['C:/x.js', /drive letter/],
    ['a\\..\\b.js', /backslash/],
    ['a//b.js', /empty or "\." path segment/],
    ['./a.js', /empty or "\." path segment/],
    ['a\u0000b', /control characters/],
    ['', /empty name/],
  ];
  for (const [name, re] of refused) {
    test(`refused: ${JSON.stringify(name)}`, () => {
      const r = checkEntryName(name);
      assert.ok('error' in r);
      assert.match(r.error, re);
    });
  }
  test('the extension root: the top, or the one folder holding manifest.json', () => {
    assert.equal(extensionRoot(['manifest.json', 'a.js']), '');
    assert.equal(extensionRoot(['ext/manifest.json', 'ext/a.js', '__MACOSX/ext/._a.js']), 'ext');
    assert.equal(extensionRoot(['a/manifest.json', 'b/x.js']), null);
    assert.equal(extensionRoot(['a/b/manifest.json']), null);
    assert.equal(extensionRoot(['readme.txt']), null);
  });
  test('top-level names starting with "_" are Chrome\'s, except _locales and _metadata', () => {
    assert.equal(reservedTopLevel(['_locales/en/messages.json', '_metadata/verified_contents.json', 'a/_x.js']), null);
    assert.equal(reservedTopLevel(['manifest.json', '_evil/x.js']), '_evil');
  });
});

describe('unpacking an uploaded zip', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'ext-unpack-'));
  after(() => fs.rmSync(root, { recursive: true, force: true }));
  let n = 0;
  const dest = () => path.join(root, `d${n++}`);

  test('a valid extension is written out file by file; a zipped folder is unwrapped', async () => {
    const d = dest();
    const m = await unpackExtension(await makeZip(MARKER_EXTENSION), d);
    assert.deepEqual(m, { name: 'browserd marker', version: '1.0.0', manifestVersion: 3 });
    assert.deepEqual(fs.readdirSync(d).sort(), ['content.js', 'manifest.json']);
    const wrapped = dest();
    await unpackExtension(await makeZip({ 'my-ext/': '', 'my-ext/manifest.json': MARKER_EXTENSION['manifest.json']!, 'my-ext/content.js': 'x', 'my-ext/img/': '' }), wrapped);
    assert.deepEqual(fs.readdirSync(wrapped).sort(), ['content.js', 'img', 'manifest.json']);
  });

  const refusals: [string, () => Promise<Buffer>, RegExp][] = [
    ['not a zip', async () => Buffer.from('this is not a zip archive at all'), /not a readable zip archive/],
    ['a truncated zip', async () => (await makeZip(MARKER_EXTENSION)).subarray(0, 60), /not a readable zip archive/],
    ['no manifest', async () => makeZip({ 'content.js': 'x' }), /no manifest\.json/],
    ['a bad manifest', async () => makeZip({ 'manifest.json': '{"manifest_version":3}' }), /name must be/],
    ['an entry climbing out (..)', async () => zipWithRawName({ ...MARKER_EXTENSION, 'zz/evil.js': 'x' }, 'zz/evil.js', '../evil.js'), /climbs out/],
    ['an absolute entry', async () => zipWithRawName({ ...MARKER_EXTENSION, 'xtmp/evil.js': 'x' }, 'xtmp/evil.js', '/tmp/evil.js'), /absolute path|not a readable/],
    ['a symbolic link', async () => makeZip({ ...MARKER_EXTENSION, 'link': '/etc/passwd' }, { link: 0o120777 }), /symbolic link/],
    ['a reserved top-level name', async () => makeZip({ ...MARKER_EXTENSION, '_x/a.js': 'x' }), /reserved by Chrome/],
  ];
  for (const [what, make, re] of refusals) {
    test(`refused with a reason: ${what}; nothing is left behind`, async () => {
      const d = dest();
      await assert.rejects(unpackExtension(await make(), d), (err: unknown) => {
        assert.ok(err instanceof ArchiveError, String(err));
        assert.match(err.message, re);
        return true;
      });
      assert.equal(fs.existsSync(d), false);
      assert.equal(fs.existsSync(path.join(root, 'evil.js')), false);
      assert.equal(fs.existsSync('/tmp/evil.js'), false);
    });
  }
});
