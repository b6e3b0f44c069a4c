import type { Logger } from 'pino';
import { CdpClient } from '../runtime/cdp-client.js';
import type { TelemetryEvent } from './telemetry-events.js';

/** The SDK's target_type values; Chromium's others (browser_ui, iframe, worker...) are `other`. */
const SDK_TARGET_TYPES = new Set(['page', 'background_page', 'service_worker', 'shared_worker']);

/**
 * browserd's own CDP connection to a session's browser for the `system` category: with
 * target discovery on, Chromium reports every target whose renderer died
 * (`Target.targetCrashed`: crashed, killed by a signal, or out of memory). The browser
 * process itself dying is seen by the reaper (process supervision), not here.
 */
export async function watchBrowser(
  endpoint: { port: number; wsPath: string },
  emit: (e: Omit<TelemetryEvent, 'ts'>) => void,
  log: Logger,
): Promise<() => void> {
  const cdp = await CdpClient.connect(`ws://127.0.0.1:${endpoint.port}${endpoint.wsPath}`);
  const types = new Map<string, string>();
  cdp.onEvent((method, params) => {
    const p = params as { targetInfo?: { targetId: string; type: string }; targetId?: string; status?: string; errorCode?: number };
    if ((method === 'Target.targetCreated' || method === 'Target.targetInfoChanged') && p.targetInfo) types.set(p.targetInfo.targetId, p.targetInfo.type);
    else if (method === 'Target.targetDestroyed' && p.targetId) types.delete(p.targetId);
    else if (method === 'Target.targetCrashed' && p.targetId) {
      emit({
        category: 'system',
        type: 'service_crashed',
        source: { kind: 'cdp', event: 'Target.targetCrashed' },
        data: {
          phase: 'running',
          service_name: 'chromium_renderer',
          target_id: p.targetId,
          target_type: SDK_TARGET_TYPES.has(types.get(p.targetId) ?? '') ? types.get(p.targetId) : 'other',
          // Chromium's termination status: crashed, killed (signal), oom (out of memory)...
          termination_status: p.status ?? 'unknown',
          ...(typeof p.errorCode === 'number' ? { error_code: p.errorCode } : {}),
        },
      });
    }
  });
  try {
    await cdp.send('Target.setDiscoverTargets', { discover: true });
  } catch (err) {
    cdp.close();
    throw err;
  }
  log.debug('telemetry: watching the browser for crashed targets');
  return () => cdp.close();
}
