import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pino from 'pino';
import type { AttachedTarget } from '../../src/runtime/target-agent.js';
import type { SessionRecord } from '../../src/sessions/session-record.js';
import { stealthFingerprint } from '../../src/stealth/fingerprint.js';
import { StealthProvider, stealthHook } from '../../src/stealth/stealth-hooks.js';

const fp = stealthFingerprint('156.0.8078.79');
const log = pino({ level: 'silent' });

/** A target that records what it is sent; `answer` decides each command's outcome. */
function target(type: string, answer: (method: string) => Promise<unknown> = () => Promise.resolve({})): AttachedTarget & { sent: { method: string; params: Record<string, unknown> }[] } {
  const sent: { method: string; params: Record<string, unknown> }[] = [];
  return {
    sessionId: 's1',
    targetId: 't1',
    type,
    url: 'about:blank',
    parent: null,
    sent,
    send: <T>(method: string, params: Record<string, unknown> = {}) => {
      sent.push({ method, params });
      return answer(method) as Promise<T>;
    },
  };
}

describe('the stealth hook', () => {
  const hook = stealthHook(fp, log);

  test('pages and frames: Emulation.setUserAgentOverride with the user agent, client-hint metadata, platform and languages', async () => {
    for (const type of ['page', 'iframe']) {
      const t = target(type);
      await hook.attached!(t, false);
      assert.equal(t.sent.length, 1);
      assert.equal(t.sent[0]!.method, 'Emulation.setUserAgentOverride');
      assert.deepEqual(t.sent[0]!.params, { userAgent: fp.userAgent, acceptLanguage: 'en-US,en', platform: 'Linux x86_64', userAgentMetadata: fp.metadata });
    }
  });

  test('dedicated and shared workers: Network.setUserAgentOverride (no Emulation domain there)', async () => {
    for (const type of ['worker', 'shared_worker']) {
      const t = target(type);
      await hook.attached!(t, false);
      assert.deepEqual(
        t.sent.map((s) => s.method),
        ['Network.setUserAgentOverride'],
      );
      assert.deepEqual(t.sent[0]!.params.userAgentMetadata, fp.metadata);
    }
  });

  test('a page without Emulation falls back to Network', async () => {
    const t = target('page', (m) => (m.startsWith('Emulation.') ? Promise.reject(new Error("'Emulation.setUserAgentOverride' wasn't found")) : Promise.resolve({})));
    await hook.attached!(t, false);
    assert.deepEqual(
      t.sent.map((s) => s.method),
      ['Emulation.setUserAgentOverride', 'Network.setUserAgentOverride'],
    );
  });

  test('a service worker is not waited for (a paused one answers nothing until resumed): the override is sent, the hook returns', async () => {
    const t = target('service_worker', () => new Promise(() => undefined));
    await hook.attached!(t, false);
    assert.deepEqual(
      t.sent.map((s) => s.method),
      ['Network.setUserAgentOverride'],
    );
  });
});

describe('StealthProvider', () => {
  const record = (stealth: boolean) => ({ id: 's', stealth }) as SessionRecord;

  test('stealth sessions get the stealth hook; others none, and the fingerprint is not even read', () => {
    let reads = 0;
    const p = new StealthProvider(() => (reads++, fp), log);
    assert.deepEqual(p.hooksFor(record(false)), []);
    assert.equal(reads, 0);
    const hooks = p.hooksFor(record(true));
    assert.deepEqual(
      hooks.map((h) => h.name),
      ['stealth'],
    );
    p.hooksFor(record(true));
    assert.equal(reads, 1, 'the fingerprint is read once');
  });
});
