import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { after, test } from 'node:test';
import { ROOT, tempDataDir } from '../helpers/server.js';

/**
 * The `browserd` CLI on a store of its own (no server running): keys, organizations,
 * projects, configuration errors of `serve`, and the key generated at first start.
 */

type Json = Record<string, unknown>;
const BIN = path.join(ROOT, 'bin/browserd.js');

const dirs: string[] = [];
function dataDir(): string {
  const d = tempDataDir();
  dirs.push(d);
  return d;
}
after(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function baseEnv(dir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, BROWSERD_DATA_DIR: dir, ...extra };
}

/** Runs the CLI to completion (bounded: a command that hangs fails the test). */
function run(dir: string, args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [BIN, ...args], { env: baseEnv(dir, env), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      p.kill('SIGKILL');
      reject(new Error(`browserd ${args.join(' ')} did not finish in 30 s\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, 30_000);
    p.on('error', reject);
    p.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

async function ok<T = Json>(dir: string, ...args: string[]): Promise<T> {
  const r = await run(dir, args);
  assert.equal(r.code, 0, `browserd ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

async function fails(dir: string, args: string[], message: RegExp, env: Record<string, string> = {}): Promise<string> {
  const r = await run(dir, args, env);
  assert.notEqual(r.code, 0, `browserd ${args.join(' ')} should fail; stdout: ${r.stdout}`);
  assert.match(r.stderr, message, `browserd ${args.join(' ')}: stderr ${JSON.stringify(r.stderr)}`);
  return r.stderr;
}

/** Every byte of every file under `dir`. */
function allFileBytes(dir: string): string {
  let out = '';
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out += allFileBytes(p);
    else if (e.isFile()) out += fs.readFileSync(p, 'latin1');
  }
  return out;
}

test('keys create prints the key once as JSON; keys list and the store never contain it', async () => {
  const dir = dataDir();
  const created = await ok<{ id: string; key: string; key_prefix: string; organization_id: string; project_id: string | null; name: string; revoked_at: string | null }>(dir, 'keys', 'create', '--name', 'ci');
  assert.equal(typeof created.id, 'string');
  assert.equal(typeof created.key, 'string');
  assert.ok(created.key.length >= 32, 'a long random key');
  assert.equal(created.name, 'ci');
  assert.equal(created.project_id, null, 'organization-scoped by default');
  assert.equal(created.revoked_at, null);
  assert.ok(created.key.startsWith(created.key_prefix) && created.key_prefix.length < created.key.length / 2, 'only a short prefix is kept');

  const second = await ok<{ key: string; id: string }>(dir, 'keys', 'create');
  assert.notEqual(second.key, created.key, 'every key is new');

  for (const args of [['keys', 'list'], ['keys', 'list', '--org', 'default']]) {
    const r = await run(dir, args);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(!r.stdout.includes(created.key) && !r.stdout.includes(second.key), 'keys list never shows a key');
    const list = JSON.parse(r.stdout) as Json[];
    assert.deepEqual(list.map((k) => k.id).sort(), [created.id, second.id].sort());
    for (const k of list) assert.ok(!('key' in k) && !('key_hash' in k), `no secret fields: ${JSON.stringify(k)}`);
  }
  const store = allFileBytes(dir);
  assert.ok(!store.includes(created.key) && !store.includes(second.key), 'the store keeps no plain key');
});

test('keys create --project / --org need an existing project / organization', async () => {
  const dir = dataDir();
  const p = await ok<{ id: string }>(dir, 'projects', 'create', 'default', 'team-a');
  const k = await ok<{ project_id: string }>(dir, 'keys', 'create', '--project', 'team-a');
  assert.equal(k.project_id, p.id);
  await fails(dir, ['keys', 'create', '--project', 'nope'], /nope.*not found/);
  await fails(dir, ['keys', 'create', '--org', 'nope'], /nope.*not found/);
  assert.equal((await ok<Json[]>(dir, 'keys', 'list')).length, 1, 'failed creates made no key');
});

test('keys revoke marks the key revoked (once); an unknown id fails with a clear message', async () => {
  const dir = dataDir();
  const k = await ok<{ id: string }>(dir, 'keys', 'create');
  const revoked = await ok<{ id: string; revoked_at: string | null }>(dir, 'keys', 'revoke', k.id);
  assert.equal(revoked.id, k.id);
  assert.ok(revoked.revoked_at && Number.isFinite(Date.parse(revoked.revoked_at)));
  const listed = (await ok<{ id: string; revoked_at: string | null }[]>(dir, 'keys', 'list')).find((x) => x.id === k.id)!;
  assert.equal(listed.revoked_at, revoked.revoked_at);
  const again = await ok<{ revoked_at: string | null }>(dir, 'keys', 'revoke', k.id);
  assert.equal(again.revoked_at, revoked.revoked_at, 'revoking twice keeps the first time');
  await fails(dir, ['keys', 'revoke', 'no-such-key'], /no-such-key.*not found/);
  await fails(dir, ['keys', 'revoke'], /KEY_ID/);
});

test('orgs create / list / set-plan; a bad plan fails with a message naming the plans and changes nothing', async () => {
  const dir = dataDir();
  const made = await ok<{ organization: { id: string; name: string; plan: string }; defaultProject: { name: string; is_default: boolean } }>(dir, 'orgs', 'create', 'acme', '--plan', 'start_up');
  assert.equal(made.organization.name, 'acme');
  assert.equal(made.organization.plan, 'start_up');
  assert.equal(made.defaultProject.is_default, true);
  const free = await ok<{ organization: { plan: string } }>(dir, 'orgs', 'create', 'small');
  assert.equal(free.organization.plan, 'free', 'free is the default plan');

  let orgs = await ok<{ name: string; plan: string }[]>(dir, 'orgs', 'list');
  assert.deepEqual(orgs.map((o) => o.name).sort(), ['acme', 'default', 'small']);

  await fails(dir, ['orgs', 'create', 'acme'], /already exists/);
  await fails(dir, ['orgs', 'create', 'gold-org', '--plan', 'gold'], /free, hobbyist, start_up, enterprise/);
  await fails(dir, ['orgs', 'create'], /NAME/);

  const up = await ok<{ plan: string }>(dir, 'orgs', 'set-plan', 'acme', 'enterprise');
  assert.equal(up.plan, 'enterprise');
  await fails(dir, ['orgs', 'set-plan', 'acme', 'gold'], /free, hobbyist, start_up, enterprise/);
  await fails(dir, ['orgs', 'set-plan', 'acme'], /PLAN/);
  await fails(dir, ['orgs', 'set-plan', 'nope', 'free'], /nope.*not found/);

  orgs = await ok<{ name: string; plan: string }[]>(dir, 'orgs', 'list');
  assert.deepEqual(orgs.map((o) => o.name).sort(), ['acme', 'default', 'small'], 'the refused create made nothing');
  assert.equal(orgs.find((o) => o.name === 'acme')!.plan, 'enterprise', 'the refused set-plan changed nothing');
  assert.equal(orgs.find((o) => o.name === 'default')!.plan, 'free');
});

test('projects create / list, per organization', async () => {
  const dir = dataDir();
  await ok(dir, 'orgs', 'create', 'acme');
  const p = await ok<{ id: string; name: string; is_default: boolean }>(dir, 'projects', 'create', 'acme', 'web');
  assert.equal(p.name, 'web');
  assert.equal(p.is_default, false);
  await ok(dir, 'projects', 'create', 'default', 'web'); // same name, other organization
  const list = await ok<{ id: string; name: string; is_default: boolean }[]>(dir, 'projects', 'list', 'acme');
  assert.deepEqual(list.map((x) => x.name).sort(), ['default', 'web']);
  assert.equal(list.filter((x) => x.is_default).length, 1);
  assert.ok(list.some((x) => x.id === p.id));
  await fails(dir, ['projects', 'create', 'acme', 'web'], /already exists/);
  await fails(dir, ['projects', 'create', 'nope', 'x'], /nope.*not found/);
  await fails(dir, ['projects', 'list', 'nope'], /nope.*not found/);
  await fails(dir, ['projects', 'create', 'acme'], /ORG and NAME/);
  assert.equal((await ok<Json[]>(dir, 'projects', 'list', 'acme')).length, 2);
});

test('migrate brings the store up to date; an unknown command prints the usage and fails', async () => {
  const dir = dataDir();
  assert.deepEqual(await ok(dir, 'migrate'), { migrated: true });
  assert.deepEqual(await ok(dir, 'migrate'), { migrated: true }, 'idempotent');
  const r = await run(dir, ['frobnicate']);
  assert.notEqual(r.code, 0);
  assert.match(r.stdout, /usage: browserd/);
});

test('serve with a bad environment value exits non-zero, naming the variable', async () => {
  const dir = dataDir();
  const cases: [Record<string, string>, RegExp[]][] = [
    [{ BROWSERD_PORT: 'abc' }, [/BROWSERD_PORT/]],
    [{ BROWSERD_PORT: '70000' }, [/BROWSERD_PORT/]],
    [{ BROWSERD_DATABASE_URL: 'mysql://x' }, [/BROWSERD_DATABASE_URL/]],
    [{ BROWSERD_MAX_SESSIONS: '0' }, [/BROWSERD_MAX_SESSIONS/]],
    [{ BROWSERD_RATE_LIMIT: '-1' }, [/BROWSERD_RATE_LIMIT/]],
    [{ BROWSERD_API_KEY: 'short' }, [/BROWSERD_API_KEY/]],
    [{ BROWSERD_PORT: 'abc', BROWSERD_DATABASE_URL: 'mysql://x' }, [/BROWSERD_PORT/, /BROWSERD_DATABASE_URL/]],
  ];
  for (const [env, messages] of cases) {
    const r = await run(dir, ['serve'], { BROWSERD_HOST: '127.0.0.1', ...env });
    assert.notEqual(r.code, 0, `${JSON.stringify(env)} should not start: ${r.stdout}`);
    for (const m of messages) assert.match(r.stderr, m, `${JSON.stringify(env)}: ${r.stderr}`);
    assert.ok(!/browserd listening/.test(r.stdout), 'it never listened');
    assert.ok(!/bd_[A-Za-z0-9_-]{20,}/.test(r.stderr), `no key was generated for a server that did not start: ${r.stderr}`);
  }
  // A misconfigured start leaves no key behind either.
  assert.deepEqual(await ok(dir, 'keys', 'list'), []);
});

interface Served {
  url: string;
  stdout: () => string;
  stderr: () => string;
  stop(): Promise<number | null>;
}

/** `browserd serve` with no BROWSERD_API_KEY, on a free port; stdout and stderr kept apart. */
async function serve(dir: string): Promise<Served> {
  const p = spawn(process.execPath, [BIN, 'serve'], {
    env: baseEnv(dir, { BROWSERD_HOST: '127.0.0.1', BROWSERD_PORT: '0', BROWSERD_LOG_LEVEL: 'info', BROWSERD_WARM_HEADLESS: '0', BROWSERD_WARM_HEADFUL: '0' }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  p.stderr.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((r) => p.once('exit', (code) => r(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start in 30 s:\n${out}\n${err}`)), 30_000);
    readline.createInterface({ input: p.stdout }).on('line', (l) => {
      out += `${l}\n`;
      try {
        const rec = JSON.parse(l) as { msg?: string; url?: string };
        if (rec.msg === 'browserd listening' && rec.url) {
          clearTimeout(timer);
          resolve(rec.url);
        }
      } catch {
        /* not JSON */
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited with ${code}:\n${out}\n${err}`));
    });
  });
  return {
    url,
    stdout: () => out,
    stderr: () => err,
    async stop() {
      if (p.exitCode === null && p.signalCode === null) p.kill('SIGTERM');
      return exited;
    },
  };
}

test('serve with no BROWSERD_API_KEY and an empty store prints one generated key on stderr; it works; a second start prints none', async () => {
  const dir = dataDir();
  let key: string;
  const first = await serve(dir);
  try {
    const found = first.stderr().match(/bd_[A-Za-z0-9_-]{20,}/g) ?? [];
    assert.equal(found.length, 1, `exactly one key on stderr: ${first.stderr()}`);
    key = found[0]!;
    assert.ok(!first.stdout().includes(key), 'the key is not in the log (stdout)');

    const r = await fetch(`${first.url}/browsers`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(r.status, 200, await r.clone().text());
    assert.deepEqual(await r.json(), []);
    const bad = await fetch(`${first.url}/browsers`, { headers: { authorization: `Bearer ${key}x` } });
    assert.equal(bad.status, 401);
    await bad.arrayBuffer();
  } finally {
    assert.equal(await first.stop(), 0, 'a clean shutdown');
  }

  const keys = await run(dir, ['keys', 'list']);
  assert.equal(keys.code, 0, keys.stderr);
  assert.ok(!keys.stdout.includes(key), 'keys list does not show the generated key');
  assert.equal((JSON.parse(keys.stdout) as Json[]).length, 1);
  assert.ok(!allFileBytes(dir).includes(key), 'the store keeps no plain key');

  const second = await serve(dir);
  try {
    assert.ok(!/bd_[A-Za-z0-9_-]{20,}/.test(second.stderr()), `no new key on the second start: ${second.stderr()}`);
    assert.ok(!/shown only this once/.test(second.stderr() + second.stdout()));
    const r = await fetch(`${second.url}/browsers`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(r.status, 200, 'the first key still works');
    await r.arrayBuffer();
  } finally {
    assert.equal(await second.stop(), 0);
  }
  assert.equal((await ok<Json[]>(dir, 'keys', 'list')).length, 1, 'still one key');
});

test('serve on a store that already has a key (made with the CLI) generates none', async () => {
  const dir = dataDir();
  const k = await ok<{ id: string; key: string }>(dir, 'keys', 'create');
  const s1 = await serve(dir);
  try {
    assert.ok(!/bd_[A-Za-z0-9_-]{20,}/.test(s1.stderr()), `no key generated: ${s1.stderr()}`);
    const r = await fetch(`${s1.url}/browsers`, { headers: { authorization: `Bearer ${k.key}` } });
    assert.equal(r.status, 200);
    await r.arrayBuffer();
  } finally {
    assert.equal(await s1.stop(), 0);
  }
  assert.equal((await ok<Json[]>(dir, 'keys', 'list')).length, 1);
});

test('serve on a store whose every key was revoked generates none: "no key" means never held one', async () => {
  const dir = dataDir();
  const k = await ok<{ id: string; key: string }>(dir, 'keys', 'create');
  await ok(dir, 'keys', 'revoke', k.id);
  const s1 = await serve(dir);
  try {
    assert.ok(!/bd_[A-Za-z0-9_-]{20,}/.test(s1.stderr()), `no key generated: ${s1.stderr()}`);
    const r = await fetch(`${s1.url}/browsers`, { headers: { authorization: `Bearer ${k.key}` } });
    assert.equal(r.status, 401, 'the revoked key stays revoked');
    await r.arrayBuffer();
  } finally {
    assert.equal(await s1.stop(), 0);
  }
  assert.equal((await ok<Json[]>(dir, 'keys', 'list')).length, 1);
});
