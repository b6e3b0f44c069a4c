import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { isUniqueViolation, openStore, type Store } from '../../src/store/database.js';
import { Accounts } from '../../src/accounts/accounts.js';
import { DestinationRepo, TelemetryRepo } from '../../src/telemetry/telemetry-repo.js';
import { LocalKeyEncryptionKey } from '../../src/vaults/kek.js';
import { newId } from '../../src/domain/ids.js';
import type { StoreConfig } from '../../src/config.js';
import { createTestDatabase } from '../helpers/postgres.js';

/** Telemetry destinations' header values are sealed in the store on both backends, and opened only for the exporter. */

const BACKENDS: { name: string; create(): Promise<{ cfg: StoreConfig; file?: string; destroy(): Promise<void> }> }[] = [
  {
    name: 'SQLite',
    async create() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'browserd-dest-'));
      const file = path.join(dir, 'browserd.sqlite');
      return { cfg: { kind: 'sqlite', file }, file, destroy: async () => fs.rmSync(dir, { recursive: true, force: true }) };
    },
  },
  {
    name: 'PostgreSQL',
    async create() {
      const db = await createTestDatabase();
      return { cfg: { kind: 'postgres', url: db.url }, destroy: () => db.drop() };
    },
  },
];

const SECRET = 'Bearer collector-secret-7f3a';

for (const backend of BACKENDS) {
  describe(`telemetry destinations (${backend.name})`, () => {
    let env: Awaited<ReturnType<(typeof backend)['create']>>;
    let store: Store;
    let projectId: string;
    const kek = new LocalKeyEncryptionKey(crypto.randomBytes(32));
    let repo: DestinationRepo;

    before(async () => {
      env = await backend.create();
      store = await openStore(env.cfg);
      const accounts = new Accounts(store.db);
      const org = await accounts.ensureDefaultOrganization();
      projectId = (await accounts.defaultProject(org.id)).id;
      repo = new DestinationRepo(store.db, kek);
    });
    after(async () => {
      await store?.close();
      await env?.destroy();
    });

    const record = (name: string) => ({ id: newId(), projectId, name, endpoint: 'http://127.0.0.1:4318/', headerNames: ['authorization', 'x-team'], createdAt: new Date().toISOString(), updatedAt: new Date().toISOString() });

    test('header values are stored sealed; names stay readable; the exporter gets the values back', async () => {
      const d = record('sealed');
      await repo.insert(d, { authorization: SECRET, 'x-team': 'team-blue-value' });
      const row = await store.db.selectFrom('telemetry_destinations').select('headers').where('id', '=', d.id).executeTakeFirstOrThrow();
      assert.ok(!row.headers.includes(SECRET) && !row.headers.includes('collector-secret') && !row.headers.includes('team-blue-value'), row.headers);
      assert.ok(!Buffer.from(row.headers).includes(Buffer.from(SECRET).toString('base64')));
      assert.deepEqual(JSON.parse(row.headers).names, ['authorization', 'x-team']);
      if (env.file) {
        await store.close();
        store = await openStore(env.cfg);
        repo = new DestinationRepo(store.db, kek);
        // The database file's bytes (and its write-ahead log) never hold the value.
        for (const f of [env.file, `${env.file}-wal`]) if (fs.existsSync(f)) assert.ok(!fs.readFileSync(f).includes(Buffer.from('collector-secret')), f);
      }
      const found = (await repo.find(projectId, 'sealed'))!;
      assert.deepEqual(found.headerNames, ['authorization', 'x-team']);
      assert.ok(!JSON.stringify(found).includes('collector-secret'));
      assert.ok(!JSON.stringify(await repo.list(projectId)).includes('collector-secret'));
      assert.deepEqual(await repo.headers(d.id), { authorization: SECRET, 'x-team': 'team-blue-value' });
    });

    test('update: new headers replace the set and are sealed; name and endpoint change; a taken name is a unique violation', async () => {
      const d = record('to-update');
      await repo.insert(d, { authorization: SECRET, 'x-team': 'team-blue-value' });
      await repo.insert(record('taken'), {});
      const at = new Date(Date.now() + 1000).toISOString();
      const u = (await repo.update(d.id, { name: 'updated', endpoint: 'https://collector.example/otlp', headers: { 'x-api-key': 'rotated-secret-9c1e' } }, at))!;
      assert.deepEqual(
        { name: u.name, endpoint: u.endpoint, headerNames: u.headerNames, updatedAt: u.updatedAt, createdAt: u.createdAt },
        { name: 'updated', endpoint: 'https://collector.example/otlp', headerNames: ['x-api-key'], updatedAt: at, createdAt: d.createdAt },
      );
      const row = await store.db.selectFrom('telemetry_destinations').select('headers').where('id', '=', d.id).executeTakeFirstOrThrow();
      assert.ok(!row.headers.includes('rotated-secret') && !row.headers.includes('collector-secret'), row.headers);
      assert.deepEqual(JSON.parse(row.headers).names, ['x-api-key']);
      assert.deepEqual(await repo.headers(d.id), { 'x-api-key': 'rotated-secret-9c1e' });
      // Omitted fields stay; null clears the name.
      const cleared = (await repo.update(d.id, { name: null }, at))!;
      assert.equal(cleared.name, null);
      assert.equal(cleared.endpoint, 'https://collector.example/otlp');
      assert.deepEqual(await repo.headers(d.id), { 'x-api-key': 'rotated-secret-9c1e' });
      await assert.rejects(repo.update(d.id, { name: 'taken' }, at), (err) => isUniqueViolation(err));
      assert.equal(await repo.update(newId(), { name: 'nobody' }, at), null);
    });

    test('the seal is bound to its destination and its key', async () => {
      const a = record('a');
      const b = record('b');
      await repo.insert(a, { authorization: SECRET });
      await repo.insert(b, {});
      const rowA = await store.db.selectFrom('telemetry_destinations').select('headers').where('id', '=', a.id).executeTakeFirstOrThrow();
      // A sealed value moved to another row does not open there.
      await store.db.updateTable('telemetry_destinations').set({ headers: rowA.headers }).where('id', '=', b.id).execute();
      await assert.rejects(repo.headers(b.id));
      await assert.rejects(new DestinationRepo(store.db, new LocalKeyEncryptionKey(crypto.randomBytes(32))).headers(a.id));
      assert.deepEqual(await repo.headers(record('none').id), {});
    });

    test('a row stored before sealing (plain JSON) is sealed when first read', async () => {
      const d = record('legacy');
      const { headerNames: _names, ...rest } = d;
      await store.db
        .insertInto('telemetry_destinations')
        .values({ id: rest.id, project_id: projectId, name: rest.name, endpoint: rest.endpoint, headers: JSON.stringify({ authorization: SECRET }), created_at: rest.createdAt, updated_at: rest.updatedAt })
        .execute();
      assert.deepEqual((await repo.byId(d.id))!.headerNames, ['authorization']);
      const row = await store.db.selectFrom('telemetry_destinations').select('headers').where('id', '=', d.id).executeTakeFirstOrThrow();
      assert.ok(!row.headers.includes('collector-secret'), row.headers);
      assert.deepEqual(await repo.headers(d.id), { authorization: SECRET });
    });
  });
}

describe('telemetry events through the SQLite writer thread', () => {
  test('rows written by the thread are read back through the main connection, in order; a dead thread falls back to the main connection', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'browserd-writer-'));
    const file = path.join(dir, 'browserd.sqlite');
    const store = await openStore({ kind: 'sqlite', file });
    const repo = new TelemetryRepo(store.db, file);
    try {
      const ev = (seq: number) => ({ sessionId: 's1', seq, event: { category: 'control' as const, type: 'cdp_command', ts: 1_000_000 + seq, source: { kind: 'kernel_api' as const }, data: { n: seq } } });
      const writer = (repo as unknown as { writer: { broken: boolean; worker: { terminate(): Promise<number> } } }).writer;
      await repo.insertEvents(Array.from({ length: 1200 }, (_, i) => ev(i + 1)));
      assert.equal(writer.broken, false, 'the rows went through the thread');
      const page = await repo.events({ sessionId: 's1', order: 'asc', limit: 1000 });
      assert.equal(page.items.length, 1000);
      assert.equal(page.hasMore, true);
      assert.deepEqual(page.items.slice(0, 3).map((e) => e.seq), [1, 2, 3]);
      assert.deepEqual(page.items[0]!.event.data, { n: 1 });
      assert.equal(await repo.lastSeq('s1'), 1200);
      // The thread dies: writes go on through the main connection.
      await writer.worker.terminate();
      await repo.insertEvents([ev(1201)]);
      assert.equal(writer.broken, true);
      assert.equal(await repo.lastSeq('s1'), 1201);
    } finally {
      await repo.close();
      await store.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
