import { parseArgs } from 'node:util';
import { Accounts } from './accounts/accounts.js';
import { isPlan, PLANS } from './accounts/plans.js';
import { startServer } from './app.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { createLogger } from './log.js';
import { openStore } from './store/database.js';

const USAGE = `usage: browserd <command>

  serve                                   start the server (configuration from BROWSERD_* environment variables)
  migrate                                 bring the store's schema up to date and exit
  keys create [--org ORG] [--project P] [--name N]
                                          create an API key (organization-scoped unless --project); prints it once
  keys list [--org ORG]                   list keys (never the keys themselves)
  keys revoke KEY_ID                      revoke a key
  orgs create NAME [--plan PLAN]          create an organization with its default project (plans: ${PLANS.join(', ')})
  orgs list                               list organizations
  orgs set-plan ORG PLAN                  change an organization's plan
  projects create ORG NAME                create a project in an organization
  projects list ORG                       list an organization's projects
`;

function fail(message: string): never {
  process.stderr.write(`browserd: ${message}\n`);
  process.exit(2);
}

function config(): Config {
  try {
    return loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) fail(err.message);
    throw err;
  }
}

async function withAccounts<T>(fn: (a: Accounts) => Promise<T>): Promise<T> {
  const store = await openStore(config().store);
  try {
    const accounts = new Accounts(store.db);
    await accounts.ensureDefaultOrganization();
    return await fn(accounts);
  } finally {
    await store.close();
  }
}

function print(v: unknown): void {
  process.stdout.write(`${JSON.stringify(v, null, 2)}\n`);
}

async function serve(): Promise<void> {
  const cfg = config();
  const log = createLogger(cfg.logLevel);
  const server = await startServer(cfg, log);
  if (server.generatedApiKey) {
    // Printed once to the terminal, on purpose not through the logger.
    process.stderr.write(
      `\n  No API key existed, so one was created for the default organization.\n  It is shown only this once:\n\n    ${server.generatedApiKey}\n\n  Use it as: Authorization: Bearer <key>\n\n`,
    );
  }
  log.info({ url: server.url, store: cfg.store.kind, max_sessions: cfg.maxSessions }, 'browserd listening');
  let stopping = false;
  const stop = (sig: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal: sig }, 'shutting down: ending sessions');
    server.stop().then(
      () => process.exit(0),
      (err) => {
        log.error({ err: String(err) }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

export async function main(argv: string[]): Promise<void> {
  const [cmd, sub, ...rest] = argv;
  const opts = parseArgs({
    args: cmd === 'serve' || cmd === 'migrate' ? [] : rest,
    options: { org: { type: 'string' }, project: { type: 'string' }, name: { type: 'string' }, plan: { type: 'string' } },
    allowPositionals: true,
  });
  const pos = opts.positionals;
  switch (`${cmd ?? ''} ${cmd === 'serve' || cmd === 'migrate' ? '' : (sub ?? '')}`.trim()) {
    case 'serve':
      return serve();
    case 'migrate':
      await (await openStore(config().store)).close();
      return print({ migrated: true });
    case 'keys create':
      return withAccounts(async (a) => {
        const org = await a.findOrganization(opts.values.org ?? 'default');
        if (!org) fail(`organization "${opts.values.org}" not found`);
        let projectId: string | null = null;
        if (opts.values.project) {
          const p = await a.findProject(org.id, opts.values.project);
          if (!p) fail(`project "${opts.values.project}" not found in ${org.name}`);
          projectId = p.id;
        }
        const { key, info } = await a.createKey({ organizationId: org.id, projectId, name: opts.values.name });
        print({ ...info, key, note: 'the key is shown only this once' });
      });
    case 'keys list':
      return withAccounts(async (a) => {
        const org = opts.values.org ? await a.findOrganization(opts.values.org) : null;
        if (opts.values.org && !org) fail(`organization "${opts.values.org}" not found`);
        print(await a.listKeys(org?.id));
      });
    case 'keys revoke':
      if (!pos[0]) fail('keys revoke needs a KEY_ID');
      return withAccounts(async (a) => print(await a.revokeKey(pos[0]!)));
    case 'orgs create': {
      if (!pos[0]) fail('orgs create needs a NAME');
      const plan = opts.values.plan ?? 'free';
      if (!isPlan(plan)) fail(`plan must be one of ${PLANS.join(', ')}`);
      return withAccounts(async (a) => print(await a.createOrganization(pos[0]!, plan)));
    }
    case 'orgs list':
      return withAccounts(async (a) => print(await a.listOrganizations()));
    case 'orgs set-plan': {
      const [org, plan] = pos;
      if (!org || !plan || !isPlan(plan)) fail(`orgs set-plan needs ORG and a PLAN (${PLANS.join(', ')})`);
      return withAccounts(async (a) => print(await a.setPlan(org, plan)));
    }
    case 'projects create':
      if (!pos[0] || !pos[1]) fail('projects create needs ORG and NAME');
      return withAccounts(async (a) => print(await a.createProject(pos[0]!, pos[1]!)));
    case 'projects list':
      if (!pos[0]) fail('projects list needs ORG');
      return withAccounts(async (a) => {
        const org = await a.findOrganization(pos[0]!);
        if (!org) fail(`organization "${pos[0]}" not found`);
        print(await a.listProjects(org.id));
      });
    default:
      process.stdout.write(USAGE);
      if (cmd && cmd !== 'help' && cmd !== '--help') process.exit(2);
  }
}
