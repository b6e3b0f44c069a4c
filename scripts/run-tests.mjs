#!/usr/bin/env node
// Runs the whole suite (or the files given) with Node's test runner, then fails if any
// Chromium, Xvfb, x11vnc or chromedriver process started by this run outlived it, or a
// session's temporary directory was left behind.
//
// "Started by this run" is known from the environment: the run gets its own TMPDIR (so
// every test data dir, and with it every session's BROWSERD_RUNTIME_DIR, lies inside it)
// and a BROWSERD_TEST_RUN id that processes the tests launch directly inherit. Browsers
// of other runs on the same machine are never counted, nor killed.
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
process.chdir(root);

const runId = crypto.randomBytes(6).toString('hex');
const runDir = fs.mkdtempSync(path.join(os.tmpdir(), 'browserd-run-'));
fs.chmodSync(runDir, 0o711); // the session user walks through it to its session dirs

const BROWSER_SIDE = /(^|\/)(chromium|chrome|Xvfb|x11vnc|chromedriver)(\s|$)/;
function ownedByThisRun(pid) {
  try {
    const env = fs.readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0');
    return env.includes(`BROWSERD_TEST_RUN=${runId}`) || env.some((kv) => kv.startsWith(`BROWSERD_RUNTIME_DIR=${runDir}/`));
  } catch {
    return false;
  }
}
function browserSideProcesses() {
  const out = new Map();
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0').join(' ').trim();
      const stat = fs.readFileSync(`/proc/${e}/stat`, 'latin1');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue;
      if (BROWSER_SIDE.test(cmd.split(' ')[0] + ' ') && ownedByThisRun(e)) out.set(Number(e), cmd.slice(0, 160));
    } catch {}
  }
  return out;
}

let files = process.argv.slice(2);
if (!files.length) {
  for (const dir of ['test/unit', 'test/integration', 'test/e2e']) {
    if (!fs.existsSync(dir)) continue;
    for (const f of fs.readdirSync(dir).sort()) if (f.endsWith('.test.ts')) files.push(path.join(dir, f));
  }
}

const tc = spawnSync('npx', ['--no-install', 'tsc', '-p', 'tsconfig.test.json'], { stdio: 'inherit' });
if (tc.status !== 0) {
  console.error('typecheck of src/ and test/ failed');
  process.exit(1);
}

// Memory cgroups the servers of this run create (one per node, one per session) must be gone too.
function memoryCgroupBase() {
  try {
    const line = fs.readFileSync('/proc/self/cgroup', 'utf8').split('\n').find((l) => /^\d+:memory:/.test(l));
    return line ? path.join('/sys/fs/cgroup/memory', line.split(':')[2]) : null;
  } catch {
    return null;
  }
}
const cgBase = memoryCgroupBase();
const nodeGroups = () => (cgBase && fs.existsSync(cgBase) ? fs.readdirSync(cgBase).filter((n) => n.startsWith('browserd-node-')) : []);
const groupsBefore = new Set(nodeGroups());

const concurrency = process.env.TEST_CONCURRENCY ?? '2';
const run = spawnSync(process.execPath, ['--import', 'tsx', '--test', `--test-concurrency=${concurrency}`, ...files], {
  stdio: 'inherit',
  env: { ...process.env, BROWSERD_TEST: '1', BROWSERD_TEST_RUN: runId, TMPDIR: runDir },
});

const leaked = [...browserSideProcesses()];
const leftDirs = [];
for (const d of fs.readdirSync(runDir)) {
  const rt = path.join(runDir, d, 'runtime');
  if (fs.existsSync(rt)) for (const s of fs.readdirSync(rt)) leftDirs.push(path.join(rt, s));
}
fs.rmSync(runDir, { recursive: true, force: true });
const leftGroups = nodeGroups().filter((g) => !groupsBefore.has(g));
for (const g of leftGroups) {
  const dir = path.join(cgBase, g);
  for (const s of fs.readdirSync(dir, { withFileTypes: true })) if (s.isDirectory()) leftDirs.push(path.join(dir, s.name));
  leftDirs.push(dir);
}
for (const d of leftGroups.length ? leftDirs.filter((d) => d.startsWith(cgBase)) : []) {
  try {
    fs.rmdirSync(d);
  } catch {}
}
if (leftDirs.length) {
  console.error(`\nLEAK: ${leftDirs.length} session temporary director(ies) or memory cgroup(s) outlived the test suite:`);
  for (const d of leftDirs) console.error(`  ${d}`);
}
if (leaked.length) {
  console.error(`\nLEAK: ${leaked.length} browser-side process(es) outlived the test suite:`);
  for (const [pid, cmd] of leaked) console.error(`  ${pid} ${cmd}`);
  for (const [pid] of leaked) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {}
  }
  process.exit(1);
}
process.exit(leftDirs.length ? 1 : (run.status ?? 1));
