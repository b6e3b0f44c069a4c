import type { Logger } from 'pino';
import type { AttachedTarget, TargetHook } from '../runtime/target-agent.js';
import type { HookProvider, SessionAgents } from '../sessions/session-agents.js';
import type { SessionRecord } from '../sessions/session-record.js';
import type { StealthFingerprint } from './fingerprint.js';

/** navigator.platform of Chrome on 64-bit Linux. */
const PLATFORM = 'Linux x86_64';

/**
 * The CDP part of stealth mode (docs/stealth.md): every target of a stealth session (page,
 * frame, dedicated/shared/service worker), before it runs, gets regular Chrome's user agent
 * with its client-hint metadata (brands, full versions, platform) and languages. The launch
 * flags (runtime/chromium-args.ts) already give the user agent string and languages; what
 * only CDP can set is `userAgentData`/`Sec-CH-UA`, whose brands would otherwise say
 * "Chromium" alone (and "HeadlessChrome" in headless).
 */
export function stealthHook(fp: StealthFingerprint, log: Logger): TargetHook {
  const override = { userAgent: fp.userAgent, acceptLanguage: fp.languages.join(','), platform: PLATFORM, userAgentMetadata: fp.metadata };
  return {
    name: 'stealth',
    async attached(t: AttachedTarget) {
      // Pages and frames have Emulation; workers only Network. Both set the same override for the target.
      const domain = t.type === 'page' || t.type === 'iframe' ? 'Emulation' : 'Network';
      if (t.type === 'service_worker') {
        // Measured: a paused service worker answers no command until it is resumed (the agent
        // would wait out its 5 s cap). Sent now, unanswered, the override is still handled
        // before the worker's first script, as it is queued ahead of the agent's resume command.
        void t.send('Network.setUserAgentOverride', override).catch((err) => log.debug({ target_type: t.type, err: String(err) }, 'no user agent override for this target'));
        return;
      }
      try {
        await t.send(`${domain}.setUserAgentOverride`, override);
      } catch (err) {
        if (domain === 'Network') throw err;
        await t.send('Network.setUserAgentOverride', override).catch(() => {
          log.debug({ target_type: t.type, err: String(err) }, 'no user agent override for this target');
        });
      }
    },
  };
}

/** Gives stealth sessions the stealth hook from their start (also after a re-adoption). */
export class StealthProvider implements HookProvider {
  private fp: StealthFingerprint | null = null;

  constructor(
    private readonly fingerprint: () => StealthFingerprint,
    private readonly log: Logger,
  ) {}

  hooksFor(record: SessionRecord): TargetHook[] {
    if (!record.stealth) return [];
    this.fp ??= this.fingerprint();
    return [stealthHook(this.fp, this.log)];
  }
}

/**
 * Opens a stealth session's start_url in its first tab once the stealth agent is in place
 * (the browser was launched at about:blank, so even the first request carries the
 * fingerprint). Sent before POST /browsers answers, so it precedes anything a client
 * sends; not waited for, errors only logged (as a slow or failing start_url is for other sessions).
 */
export async function openStartUrl(agents: SessionAgents, sessionId: string, url: string, log: Logger): Promise<void> {
  const agent = await agents.agent(sessionId);
  const tab = agent?.list().find((t) => t.type === 'page' && t.parent === null);
  if (!tab) {
    log.warn({ session_id: sessionId }, 'no first tab to open start_url in');
    return;
  }
  void tab.send('Page.navigate', { url }, 30_000).catch((err) => log.debug({ session_id: sessionId, err: String(err) }, 'start_url navigation failed'));
}
