/**
 * The emulator's side of snapshot reads outside transactions (snapshot-reads.ts,
 * storage/snapshot-history.ts): a committed transaction is one point in time, history is kept from
 * the first snapshot read on, bounded, dropped after a window without snapshot reads, and what it
 * cannot answer is refused with NotImplemented rather than answered from other data.
 */
import { MongoClient, Timestamp, type Document } from 'mongodb';
import { startEmulator, type RunningEmulator } from '../../test-backend/emulator';
import { Storage } from '../../test-backend/emulator/storage/engine';
import { MAX_VERSIONS, SnapshotHistory } from '../../test-backend/emulator/storage/snapshot-history';
import { serverError } from './support/errors';

describe('storage: history for snapshot reads', () => {
  function insert(s: Storage, coll: ReturnType<Storage['ensureCollection']>, id: number): void {
    s.commit({ coll, key: String(id), before: null, after: { _id: id }, kind: 'insert' });
  }

  test('a transaction committed with commitAll is one boundary: times between its writes read the state before it', () => {
    const s = new Storage();
    const c = s.ensureCollection('db', 'c');
    insert(s, c, 0);
    const h = s.enableSnapshotHistory();
    const before = s.currentClusterTime();
    s.commitAll(
      [
        { coll: c, key: '1', before: null, after: { _id: 1 }, kind: 'insert' },
        { coll: c, key: '2', before: null, after: { _id: 2 }, kind: 'insert' },
      ],
      {},
    );
    const after = s.currentClusterTime();
    // The tick of the first of the two writes lies strictly between `before` and `after`.
    const between = after.i > 1 ? new Timestamp({ t: after.t, i: after.i - 1 }) : before;
    expect(h.resolve(before)).toEqual({ kind: 'ok', seq: 1 });
    expect(h.resolve(between)).toEqual({ kind: 'ok', seq: 1 });
    expect(h.resolve(after)).toEqual({ kind: 'ok', seq: 3 });
    expect(c.getAt('1', 1)).toBeUndefined();
    expect(c.getAt('1', 3)).toEqual({ _id: 1 });
  });

  test('the plain write path keeps no history until the first snapshot read', () => {
    const s = new Storage();
    const c = s.ensureCollection('db', 'c');
    insert(s, c, 1);
    expect(c.history.size).toBe(0);
    s.enableSnapshotHistory();
    insert(s, c, 2);
    expect(c.history.size).toBe(1);
  });

  test('history is dropped after a window without snapshot reads', () => {
    const s = new Storage();
    const c = s.ensureCollection('db', 'c');
    const h = s.enableSnapshotHistory();
    h.lastUsed = Date.now() - 301_000;
    for (let i = 0; i < 1024; i++) insert(s, c, i);
    expect(s.snapshots).toBeUndefined();
    expect(c.history.size).toBe(0);
  });

  test('at most MAX_VERSIONS versions: the floor moves and older times are not kept', () => {
    const start = new Timestamp({ t: Math.floor(Date.now() / 1000), i: 1 });
    const h = new SnapshotHistory(start, 0);
    for (let seq = 1; seq <= MAX_VERSIONS + 10; seq++) h.record(new Timestamp({ t: start.t, i: seq + 1 }), seq);
    expect(h.trim(start.t, MAX_VERSIONS + 10)).toBe(true);
    expect(h.floor.seq).toBeGreaterThanOrEqual(MAX_VERSIONS / 2);
    expect(h.resolve(start).kind).toBe('notKept');
    expect(h.resolve(new Timestamp({ t: start.t, i: MAX_VERSIONS + 11 }))).toEqual({ kind: 'ok', seq: MAX_VERSIONS + 10 });
  });
});

describe('server: what the emulator refuses', () => {
  let emu: RunningEmulator;
  let client: MongoClient;
  const db = (): ReturnType<MongoClient['db']> => client.db('snap_emu');

  beforeAll(async () => {
    emu = await startEmulator();
    client = new MongoClient(emu.uri, { serverSelectionTimeoutMS: 5_000 });
    await client.connect();
  });

  afterAll(async () => {
    await client.close();
    await emu.stop();
  });

  const notImplemented = async (cmd: Document, what: RegExp): Promise<void> => {
    const e = await serverError(db().command(cmd));
    expect(e.code).toBe(238);
    expect(e.message).toMatch(what);
  };

  test('a time before the first snapshot read (history not kept yet)', async () => {
    const t = (await db().command({ insert: 'a', documents: [{ _id: 1 }] })).operationTime as Timestamp;
    await db().command({ insert: 'a', documents: [{ _id: 2 }] });
    await notImplemented({ find: 'a', readConcern: { level: 'snapshot', atClusterTime: t } }, /keeps snapshot history from/);
  });

  test('a collection created at or after the snapshot time, or dropped since', async () => {
    const first = await db().command({ find: 'b', readConcern: { level: 'snapshot' } });
    const t = first.cursor.atClusterTime as Timestamp;
    await db().command({ insert: 'b', documents: [{ _id: 1 }] });
    await notImplemented({ find: 'b', readConcern: { level: 'snapshot', atClusterTime: t } }, /created at or after that time/);

    await db().command({ insert: 'c', documents: [{ _id: 1 }] });
    const t2 = (await db().command({ find: 'c', readConcern: { level: 'snapshot' } })).cursor.atClusterTime as Timestamp;
    await db().collection('c').drop();
    await notImplemented({ find: 'c', readConcern: { level: 'snapshot', atClusterTime: t2 } }, /dropped since/);
  });

  test('$out, $merge and writes with readConcern snapshot', async () => {
    await db().command({ insert: 'd', documents: [{ _id: 1 }] });
    await notImplemented({ aggregate: 'd', pipeline: [{ $out: 'e' }], cursor: {}, readConcern: { level: 'snapshot' } }, /\$out/);
    await notImplemented({ aggregate: 'd', pipeline: [{ $merge: 'e' }], cursor: {}, readConcern: { level: 'snapshot' } }, /\$merge/);
    await notImplemented({ insert: 'd', documents: [{ _id: 2 }], readConcern: { level: 'snapshot' } }, /for 'insert'/);
  });
});
