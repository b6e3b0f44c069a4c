/**
 * The SQLite writer of telemetry events, in a worker thread: better-sqlite3 is synchronous,
 * so inserting a burst of events (thousands a second from a busy CDP client) on the main
 * thread would stall the CDP relay. This thread holds its own connection to the same
 * database file (WAL: readers on the main connection see each batch once committed).
 */
import { parentPort, workerData } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';

type Row = [sessionId: string, seq: number, ts: number, category: string, type: string, event: string];

const db = new BetterSqlite3((workerData as { file: string }).file);
db.pragma('journal_mode = WAL');
db.pragma('synchronous = FULL');
db.pragma('busy_timeout = 5000');
const insert = db.prepare('INSERT INTO telemetry_events (session_id, seq, ts, category, type, event) VALUES (?, ?, ?, ?, ?, ?)');
const batch = db.transaction((rows: Row[]) => {
  for (const r of rows) insert.run(r);
});

parentPort!.on('message', (m: { id: number; rows?: Row[]; close?: boolean }) => {
  if (m.close) {
    db.close();
    parentPort!.postMessage({ id: m.id });
    return;
  }
  try {
    batch(m.rows!);
    parentPort!.postMessage({ id: m.id });
  } catch (err) {
    parentPort!.postMessage({ id: m.id, error: String(err) });
  }
});
