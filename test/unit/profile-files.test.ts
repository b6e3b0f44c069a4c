import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ProfileFiles } from '../../src/profiles/profile-files.js';

/** Stored profile state: what a save keeps, what it refuses to follow, and that it replaces the state atomically. */

let dataDir: string;
let files: ProfileFiles;

before(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'profile-files-'));
  files = new ProfileFiles(dataDir);
  files.prepare();
});
after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

/** A user-data-dir as Chromium leaves it, plus things a session user could plant. */
function userDataDir(marker: string): string {
  const d = fs.mkdtempSync(path.join(dataDir, 'udd-'));
  const w = (rel: string, text = marker) => {
    fs.mkdirSync(path.dirname(path.join(d, rel)), { recursive: true });
    fs.writeFileSync(path.join(d, rel), text);
  };
  w('Local State', '{}');
  w('Default/Cookies');
  w('Default/Preferences', '{}');
  w('Default/Local Storage/leveldb/000003.log');
  w('Default/IndexedDB/http_127.0.0.1_8080.indexeddb.leveldb/CURRENT');
  w('Default/Cache/Cache_Data/data_0');
  w('Default/Code Cache/js/index');
  w('Default/GPUCache/data_1');
  w('Default/Service Worker/CacheStorage/x');
  w('GrShaderCache/data_0');
  w('Crashpad/settings.dat');
  w('DevToolsActivePort', '1234\n/devtools/browser/x');
  fs.symlinkSync('vm-12345', path.join(d, 'SingletonLock'));
  // Planted: links to the server's files must never be followed (nor kept).
  fs.symlinkSync('/etc/hostname', path.join(d, 'Default/leak'));
  fs.mkdirSync(path.join(d, 'Default/dirlink-target'));
  fs.symlinkSync('/etc', path.join(d, 'Default/etc-link'));
  execFileSync('mkfifo', [path.join(d, 'Default/fifo')]);
  return d;
}

function listTree(root: string, rel = ''): string[] {
  const out: string[] = [];
  for (const name of fs.readdirSync(path.join(root, rel)).sort()) {
    const r = rel ? `${rel}/${name}` : name;
    const st = fs.lstatSync(path.join(root, r));
    out.push(st.isDirectory() ? `${r}/` : st.isSymbolicLink() ? `${r}@` : r);
    if (st.isDirectory()) out.push(...listTree(root, r));
  }
  return out;
}

test('a save keeps cookies, local storage, IndexedDB and preferences; drops caches, locks, crash data; skips links and special files', () => {
  files.create('p1');
  assert.equal(files.current('p1'), null);
  files.save('p1', userDataDir('one'));
  const cur = files.current('p1');
  assert.ok(cur);
  assert.deepEqual(listTree(cur), [
    'Default/',
    'Default/Cookies',
    'Default/IndexedDB/',
    'Default/IndexedDB/http_127.0.0.1_8080.indexeddb.leveldb/',
    'Default/IndexedDB/http_127.0.0.1_8080.indexeddb.leveldb/CURRENT',
    'Default/Local Storage/',
    'Default/Local Storage/leveldb/',
    'Default/Local Storage/leveldb/000003.log',
    'Default/Preferences',
    'Default/Service Worker/',
    'Default/dirlink-target/',
    'Local State',
  ]);
  assert.equal(fs.readFileSync(path.join(cur, 'Default/Cookies'), 'utf8'), 'one');
  // Stored state is browserd's own: not readable by the session user.
  assert.equal(fs.statSync(path.join(cur, 'Default/Cookies')).mode & 0o077, 0);
  assert.equal(fs.statSync(files.root).mode & 0o777, 0o700);
});

test('a new save replaces the state through one rename of `current`; the old copy stays readable for a grace period, then goes', () => {
  files.create('p2');
  files.save('p2', userDataDir('first'));
  const first = files.current('p2')!;
  files.save('p2', userDataDir('second'));
  const second = files.current('p2')!;
  assert.notEqual(second, first);
  assert.equal(fs.readFileSync(path.join(second, 'Default/Cookies'), 'utf8'), 'second');
  // A reader that resolved the old state before the swap can still finish.
  assert.equal(fs.readFileSync(path.join(first, 'Default/Cookies'), 'utf8'), 'first');
  assert.ok(fs.lstatSync(path.join(files.dir('p2'), 'current')).isSymbolicLink());
  files.collect('p2', Date.now() + 11 * 60 * 1000);
  assert.equal(fs.existsSync(first), false);
  assert.equal(files.current('p2'), second);
});

test('a save cut short (a crash before the rename) leaves the previous state in force, and its leftovers are collected', () => {
  files.create('p3');
  files.save('p3', userDataDir('kept'));
  const kept = files.current('p3')!;
  // What a crash mid-copy leaves: a partial temp dir.
  const partial = path.join(files.dir('p3'), '.tmp-deadbeef');
  fs.mkdirSync(path.join(partial, 'Default'), { recursive: true });
  fs.writeFileSync(path.join(partial, 'Default/Cookies'), 'half');
  assert.equal(files.current('p3'), kept);
  assert.equal(fs.readFileSync(path.join(files.current('p3')!, 'Default/Cookies'), 'utf8'), 'kept');
  files.collect('p3', Date.now() + 11 * 60 * 1000);
  assert.equal(fs.existsSync(partial), false);
  assert.equal(files.current('p3'), kept);
});

test('saving into a deleted profile fails and creates nothing', () => {
  assert.throws(() => files.save('gone', userDataDir('x')), /no storage directory/);
  assert.equal(fs.existsSync(files.dir('gone')), false);
});
