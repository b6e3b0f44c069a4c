import type { Logger } from 'pino';
import { TargetAgent, type TargetHook } from '../runtime/target-agent.js';
import type { SessionRecord } from './session-record.js';

/** A feature that prepares a session's targets: says which hooks a session needs from its start. */
export interface HookProvider {
  hooksFor(record: SessionRecord): TargetHook[];
}

type Endpoint = { port: number; wsPath: string };

/**
 * The server-side CDP agents of the sessions running on this node (see TargetAgent): one
 * connection per session, opened only while some feature has a hook on it. Hooks needed
 * from the start (stealth, CAPTCHA detection) are in place before `POST /browsers`
 * answers; others (telemetry categories switched on by PATCH) are added later.
 */
export class SessionAgents {
  private readonly providers: HookProvider[] = [];
  private readonly endpoints = new Map<string, Endpoint>();
  private readonly agents = new Map<string, Promise<TargetAgent | null>>();

  constructor(private readonly log: Logger) {}

  provide(p: HookProvider): void {
    this.providers.push(p);
  }

  /** The session's browser is up (launched, handed out or re-adopted): starts its agent if a provider wants one. */
  async start(record: SessionRecord, endpoint: Endpoint): Promise<void> {
    this.endpoints.set(record.id, endpoint);
    const hooks = this.providers.flatMap((p) => p.hooksFor(record));
    if (!hooks.length) return;
    const agent = await this.connect(record.id, hooks);
    if (!agent) return;
    // Hooks added by another caller while connecting are already in; these are idempotent by name.
    for (const h of hooks) await agent.add(h);
  }

  /** Adds a hook to a running session (connecting its agent if needed); false when the session isn't running here. */
  async add(sessionId: string, hook: TargetHook): Promise<boolean> {
    const existing = this.agents.get(sessionId);
    const agent = existing ? await existing : await this.connect(sessionId, [hook]);
    if (!agent) return false;
    await agent.add(hook);
    return true;
  }

  /** Removes a hook; the connection stays open for the session's other hooks. */
  remove(sessionId: string, name: string): void {
    void this.agents.get(sessionId)?.then((a) => a?.remove(name));
  }

  /** The session's agent, if one runs. */
  agent(sessionId: string): Promise<TargetAgent | null> {
    return this.agents.get(sessionId) ?? Promise.resolve(null);
  }

  /** The session is ending: closes its agent first (browserd's own connection must not see the teardown as a crash). */
  async stop(sessionId: string): Promise<void> {
    this.endpoints.delete(sessionId);
    const a = this.agents.get(sessionId);
    this.agents.delete(sessionId);
    (await a)?.close();
  }

  private connect(sessionId: string, hooks: TargetHook[]): Promise<TargetAgent | null> {
    const existing = this.agents.get(sessionId);
    if (existing) return existing;
    const endpoint = this.endpoints.get(sessionId);
    if (!endpoint) return Promise.resolve(null);
    const job = TargetAgent.connect(endpoint, hooks, this.log.child({ session_id: sessionId })).catch((err) => {
      this.log.warn({ session_id: sessionId, err: String(err) }, 'could not open the session agent');
      this.agents.delete(sessionId);
      return null;
    });
    this.agents.set(sessionId, job);
    return job;
  }
}
