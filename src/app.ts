import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import swagger from '@fastify/swagger';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import { Accounts } from './accounts/accounts.js';
import { browserRoutes } from './api/browsers.js';
import { browserPoolRoutes } from './api/browser-pools.js';
import { PoolRepo } from './pools/pool-repo.js';
import { PoolService } from './pools/pool-service.js';
import { healthRoutes } from './api/health.js';
import { liveViewRoutes } from './api/live-view.js';
import { telemetryRoutes } from './api/telemetry.js';
import { profileRoutes } from './api/profiles.js';
import { extensionRoutes } from './api/extensions.js';
import { proxyRoutes } from './api/proxies.js';
import { EgressBridges } from './proxies/egress-bridge.js';
import { ProxyRepo } from './proxies/proxy-repo.js';
import { ProxyService } from './proxies/proxy-service.js';
import { loadLocalKek } from './vaults/kek.js';
import { ExtensionRepo } from './extensions/extension-repo.js';
import { ExtensionService } from './extensions/extension-service.js';
import { vaultRoutes } from './api/vaults.js';
import { defaultPublicUrl, type Config } from './config.js';
import { bidiChannel } from './gateway/bidi-channel.js';
import { cdpChannel } from './gateway/cdp-channel.js';
import { liveChannel } from './gateway/live-channel.js';
import { cdpDiscoveryRoutes } from './gateway/cdp-discovery.js';
import { SessionTokens } from './gateway/tokens.js';
import { Gateway } from './gateway/upgrade.js';
import { installAuth } from './http/auth.js';
import { installErrorHandling } from './http/error-handler.js';
import { installRateLimit } from './http/rate-limit.js';
import { validatorCompiler } from './http/validation.js';
import { BrowserRuntime } from './runtime/browser-runtime.js';
import { MemoryCgroups } from './runtime/memory-cgroup.js';
import { PolicySchemaSource } from './runtime/policy-schema.js';
import { resolveSandboxUser } from './runtime/sandbox-user.js';
import { SessionRepo } from './sessions/session-repo.js';
import { SessionService } from './sessions/session-service.js';
import { SessionResources } from './sessions/session-resources.js';
import { ProfileFiles } from './profiles/profile-files.js';
import { ProfileRepo } from './profiles/profile-repo.js';
import { ProfileService } from './profiles/profile-service.js';
import { openStore, type Store } from './store/database.js';
import { TelemetryRepo } from './telemetry/telemetry-repo.js';
import { TelemetryService } from './telemetry/telemetry-service.js';
import { SessionAgents } from './sessions/session-agents.js';
import { stealthFingerprintOf } from './stealth/chromium-version.js';
import { StealthProvider } from './stealth/stealth-hooks.js';
import { CaptchaService } from './captcha/captcha-service.js';
import { SolverClient } from './captcha/solver-client.js';
import { WarmPool } from './sessions/warm-pool.js';
import { VaultService } from './vaults/vault-service.js';

export interface RunningServer {
  url: string;
  app: FastifyInstance;
  sessions: SessionService;
  /** Set when this start generated the first API key; the caller prints it once. */
  generatedApiKey: string | null;
  stop(): Promise<void>;
}

/** This node's id: configured, else created once and kept in the data dir. */
function loadNodeId(cfg: Config): string {
  if (cfg.nodeId) return cfg.nodeId;
  const file = path.join(cfg.dataDir, 'node-id');
  try {
    const id = fs.readFileSync(file, 'utf8').trim();
    if (id) return id;
  } catch {
    /* first start */
  }
  const id = `node-${crypto.randomBytes(6).toString('hex')}`;
  fs.writeFileSync(file, `${id}\n`, { mode: 0o600 });
  return id;
}

/** Ensures the configured key exists, or generates the first key when the store has none. */
async function bootstrapKeys(accounts: Accounts, cfg: Config): Promise<string | null> {
  const org = await accounts.ensureDefaultOrganization();
  if (cfg.apiKey) {
    await accounts.ensureKey(cfg.apiKey, org.id, 'BROWSERD_API_KEY');
    return null;
  }
  // Only a store that never held a key gets one: revoking every key must not mint a new one at the next start.
  if ((await accounts.countKeys()) > 0) return null;
  const { key } = await accounts.createKey({ organizationId: org.id, name: 'generated at first start' });
  return key;
}

/**
 * Composition root: builds every service, reconciles what a previous run left, then
 * serves the API and the websocket edge on one port. `stop()` undoes it in reverse.
 */
export async function startServer(cfg: Config, log: Logger): Promise<RunningServer> {
  fs.mkdirSync(cfg.dataDir, { recursive: true });
  const store: Store = await openStore(cfg.store);
  if (cfg.store.kind === 'sqlite') for (const f of [cfg.store.file, `${cfg.store.file}-wal`, `${cfg.store.file}-shm`]) if (fs.existsSync(f)) fs.chmodSync(f, 0o600);
  const accounts = new Accounts(store.db);
  const generatedApiKey = await bootstrapKeys(accounts, cfg);
  const nodeId = loadNodeId(cfg);
  const tokens = await SessionTokens.load(store.db);
  const cgroups = MemoryCgroups.detect(nodeId);
  if (!cgroups) log.warn('memory cgroups are not available (not root, or no memory controller): session memory limits are not enforced');
  const runtime = new BrowserRuntime({ chromiumPath: cfg.chromiumPath, dataDir: cfg.dataDir, user: resolveSandboxUser(cfg.sessionUser), cgroups, log });
  runtime.prepare();
  const policySchema = new PolicySchemaSource({ runtime, chromiumPath: cfg.chromiumPath, dataDir: cfg.dataDir, log });
  const vaults = await VaultService.open({ db: store.db, storeKind: cfg.store.kind, dataDir: cfg.dataDir, kek: cfg.vaultKek, link: cfg.link, log });
  const profileFiles = new ProfileFiles(cfg.dataDir);
  profileFiles.prepare();
  const profiles = new ProfileService({ repo: new ProfileRepo(store.db), files: profileFiles, log });
  const extensions = new ExtensionService({ repo: new ExtensionRepo(store.db), dataDir: cfg.dataDir, log });
  extensions.prepare();
  // Proxy passwords and telemetry destinations' header values are sealed under the vaults' key-encryption key: one key to keep safe.
  const kek = loadLocalKek({ configured: cfg.vaultKek, dataDir: cfg.dataDir }).kek;
  const proxies = new ProxyService({ repo: new ProxyRepo(store.db), kek, log });
  const bridges = new EgressBridges(log);
  const resources = new SessionResources({ profiles, extensions, proxies, bridges, ...(cfg.stealthProxyUrl ? { stealthProxyUrl: cfg.stealthProxyUrl } : {}), log });
  // SQLite: events are written by a thread of their own, so bursts of them never stall the CDP relay.
  const telemetryRepo = new TelemetryRepo(store.db, cfg.store.kind === 'sqlite' ? cfg.store.file : undefined);
  const agents = new SessionAgents(log);
  // Stealth mode's fingerprint in every target of stealth sessions: docs/stealth.md.
  agents.provide(new StealthProvider(() => stealthFingerprintOf(cfg.chromiumPath), log.child({ component: 'stealth' })));
  const telemetry = new TelemetryService({ repo: telemetryRepo, log, agents, screenshotIntervalMs: cfg.telemetryScreenshotIntervalMs, retainedEvents: cfg.telemetryRetainedEvents, kek });
  // CAPTCHA detection (and solving, with a solver configured) in stealth sessions: docs/captcha.md.
  agents.provide(new CaptchaService({ solver: cfg.captchaSolver ? new SolverClient(cfg.captchaSolver) : null, emit: (id, e) => void telemetry.emit(id, e), log: log.child({ component: 'captcha' }) }));
  // Warm start (docs/warm-start.md): fills only once reconciliation has swept what a previous run left.
  const warm = new WarmPool({
    runtime,
    bridges,
    sizes: { headless: cfg.warm.headless, headful: cfg.warm.headful },
    refillGapMs: cfg.warm.refillGapMs,
    maxSessions: cfg.maxSessions,
    memoryEnforced: cgroups !== null,
    activeCount: () => sessions.activeCount,
    log: log.child({ component: 'warm-pool' }),
  });
  const sessions: SessionService = new SessionService({ repo: new SessionRepo(store.db), runtime, tokens, policySchema, config: cfg, nodeId, log, memoryEnforced: cgroups !== null, vaults, resources, telemetry, agents, warm });
  const reconciled = await sessions.reconcile();
  // Pools come back with the browsers reconciliation re-adopted; lost ones are refilled.
  const pools = new PoolService({ repo: new PoolRepo(store.db), sessions, accounts, nodeId, log, resources, telemetry });
  sessions.setPoolLink(pools);
  await pools.start();
  log.info({ node_id: nodeId, ...reconciled }, 'reconciled sessions from the store');

  const app: FastifyInstance = Fastify({
    loggerInstance: log as unknown as FastifyBaseLogger,
    bodyLimit: 1024 * 1024,
    routerOptions: { maxParamLength: 512 },
    // A path that is not valid percent-encoding never reaches a route or the error handler.
    frameworkErrors: (err, _req, reply) => {
      void (reply as unknown as FastifyReply).code(400).type('application/json').send({ code: 'bad_request', message: err.message });
    },
    // Requests too broken for the router (oversized headers, garbage request line) still get the Error body.
    clientErrorHandler: (err: NodeJS.ErrnoException, socket) => {
      const overflow = err.code === 'HPE_HEADER_OVERFLOW';
      const status = overflow ? 431 : 400;
      const body = JSON.stringify({ code: overflow ? 'headers_too_large' : 'bad_request', message: overflow ? 'request headers are too large' : 'malformed HTTP request' });
      if (socket.writable) {
        socket.end(`HTTP/1.1 ${status} ${overflow ? 'Request Header Fields Too Large' : 'Bad Request'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
      }
      socket.destroy();
    },
  });
  app.setValidatorCompiler(validatorCompiler);
  // Empty JSON bodies (DELETE with a content type, POST with nothing) read as "no body".
  const jsonParser = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    if (body === '' || (typeof body === 'string' && body.trim() === '')) return done(null, undefined);
    jsonParser(req, body as string, done);
  });
  // Bodies are JSON only: a text/plain body is 415, not a string that fails validation as 400.
  app.removeContentTypeParser('text/plain');
  installErrorHandling(app);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'browserd', version: '0.1.0', description: 'Kernel-compatible remote browser sessions' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
  });
  await installRateLimit(app, cfg.rateLimitPerMinute);
  installAuth(app, accounts);
  app.get('/openapi.json', { config: { auth: false }, schema: { summary: 'This OpenAPI document', tags: ['meta'], security: [] } }, async () => app.swagger());
  healthRoutes(app, { store, chromiumPath: cfg.chromiumPath, warm: () => warm.counts() });
  browserRoutes(app, sessions);
  browserPoolRoutes(app, pools);
  telemetryRoutes(app, { sessions, repo: telemetryRepo, telemetry });
  profileRoutes(app, profiles);
  await extensionRoutes(app, extensions);
  proxyRoutes(app, proxies);
  cdpDiscoveryRoutes(app, { sessions, tokens, runtime });
  await liveViewRoutes(app, { sessions, tokens });
  await vaultRoutes(app, { vaults, sessions });

  const gateway = new Gateway({ sessions, tokens, log, channels: { cdp: cdpChannel, bidi: bidiChannel, live: liveChannel }, telemetry });
  app.server.on('upgrade', gateway.onUpgrade);

  await app.listen({ host: cfg.host, port: cfg.port });
  const port = (app.server.address() as AddressInfo).port;
  const url = cfg.publicUrl ?? defaultPublicUrl(cfg.host, port);
  sessions.setPublicUrl(url);
  vaults.setPublicUrl(url);
  sessions.startReaper();
  warm.start();

  const heartbeat = async () => {
    const now = new Date().toISOString();
    await store.db
      .insertInto('nodes')
      .values({ id: nodeId, address: defaultPublicUrl(cfg.host, port), region: cfg.regions.join(','), capacity: cfg.maxSessions, started_at: now, heartbeat_at: now })
      .onConflict((oc) => oc.column('id').doUpdateSet({ address: defaultPublicUrl(cfg.host, port), region: cfg.regions.join(','), capacity: cfg.maxSessions, heartbeat_at: now }))
      .execute();
  };
  await heartbeat();
  const beat = setInterval(() => heartbeat().catch((err) => log.warn({ err: String(err) }, 'node heartbeat failed')), 10_000);
  beat.unref();

  let stopping: Promise<void> | null = null;
  return {
    url,
    app,
    sessions,
    generatedApiKey,
    stop() {
      stopping ??= (async () => {
        clearInterval(beat);
        // No new requests or upgrades from here; in-flight ones finish.
        const httpClosed = app.close();
        // Ending the sessions closes their websockets with 1000 "session ended (server_shutdown)".
        pools.stop();
        await sessions.shutdown();
        await pools.drain();
        await bridges.closeAll();
        await telemetry.stop();
        gateway.close();
        await httpClosed;
        await vaults.stop();
        runtime.close();
        await store.close();
      })();
      return stopping;
    },
  };
}
