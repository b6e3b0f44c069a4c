#!/usr/bin/env node
// Runs the whole suite (or the files given) with Node's test runner, then fails if any
// Chromium, Xvfb, x11vnc or chromedriver process started during the run outlived it.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
process.chdir(root);

const BROWSER_SIDE = /(^|\/)(chromium|chrome|Xvfb|x11vnc|chromedriver)(\s|$)/;
function browserSideProcesses() {
  const out = new Map();
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0').join(' ').trim();
      if (BROWSER_SIDE.test(cmd.split(' ')[0] + ' ')) out.set(Number(e), cmd.slice(0, 160));
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

const before = browserSideProcesses();
const concurrency = process.env.TEST_CONCURRENCY ?? '2';
const run = spawnSync(process.execPath, ['--import', 'tsx', '--test', `--test-concurrency=${concurrency}`, ...files], {
  stdio: 'inherit',
  env: { ...process.env, BROWSERD_TEST: '1' },
});

const leaked = [...browserSideProcesses()].filter(([pid]) => !before.has(pid));
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
process.exit(run.status ?? 1);
