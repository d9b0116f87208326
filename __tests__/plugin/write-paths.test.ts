/**
 * Issue 10: one table-driven test over every write path (see __tests__/support/write-paths.ts),
 * on a model, on a discriminator of it and on the same schema compiled on a second connection,
 * with the atomic guard (`transactions: 'auto'`) and the check-then-write one (`'never'`):
 *  - guarded paths refuse an anonymous writer (LockedError with the holder's label; the stored document unchanged) and
 *    let the holder write;
 *  - refused paths refuse everyone with a typed error before anything is written;
 *  - inserts go through; unguarded paths land (as docs/write-guard.md says).
 * Also checks that the table names every write method Mongoose (8 or 9, whichever runs) and the
 * driver's collection have, and that the write guard guide's "Write paths" table (docs/write-guard.md) says exactly what the
 * table says.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import mongoose, { Schema, type Connection } from 'mongoose';
import { InvalidLockArgumentError, LockNotHeldError, LockedError, type LockPluginOptions } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemSchema, type WorkItemModel } from '../support/work-item';
import { NOT_WRITES, WRITE_NAME, WRITE_PATHS, type WriteFixture, type WritePath } from '../support/write-paths';

const db = testDatabase('writepaths');
let conn: MonitoredConnection;
let second: MonitoredConnection;
const models = new Map<string, WorkItemModel>();
let counter = 0;

beforeAll(async () => {
  conn = await connect(db.name);
  second = await connect(db.name);
  for (const [mode, options] of [
    ['auto', { ttl: 30_000 }],
    ['never', { ttl: 30_000, transactions: 'never' }],
  ] as [string, LockPluginOptions][]) {
    const schema = workItemSchema(options);
    const name = `WritePath_${mode}`;
    const base = conn.connection.model(name, schema) as unknown as WorkItemModel;
    const discriminator = base.discriminator(`${name}_special`, new Schema({ extra: String })) as unknown as WorkItemModel;
    const other = second.connection.model(name, schema) as unknown as WorkItemModel;
    for (const m of [base, other]) {
      await m.init();
      await m.lockModel().init();
    }
    models.set(`${mode}/model`, base);
    models.set(`${mode}/discriminator`, discriminator);
    models.set(`${mode}/second connection`, other);
  }
});

afterAll(async () => {
  await db.drop(conn.connection);
  await Promise.all([conn.close(), second.close()]);
});

function connectionOf(variant: string): Connection {
  return variant === 'second connection' ? second.connection : conn.connection;
}

async function fixture(mode: string, variant: string): Promise<WriteFixture> {
  const model = models.get(`${mode}/${variant}`)!;
  const edits = ++counter;
  const { _id: id } = await model.create({ title: 'original', edits });
  const plain = await model.findById(id).orFail();
  const held = await model.lock(id, 'holder', { label: 'Holder' });
  return { model, connection: connectionOf(variant), id, edits, plain, held };
}

const stored = (f: WriteFixture) => f.connection.getClient().db(f.connection.name).collection(f.model.collection.collectionName).findOne({ _id: f.id });

const runnable = WRITE_PATHS.filter((p): p is WritePath & { run: NonNullable<WritePath['run']> } => p.run !== undefined);
const cases = ['auto', 'never'].flatMap((mode) => ['model', 'discriminator', 'second connection'].flatMap((variant) => runnable.map((path) => [mode, variant, path.name, path] as const)));

describe.each(cases)('%s / %s / %s', (mode, variant, _name, path) => {
  if (path.outcome === 'yes') {
    test('an anonymous writer is refused and nothing is written', async () => {
      const f = await fixture(mode, variant);
      const before = await stored(f);
      const error = await path.run(f, 'anonymous').then(() => undefined, (e: unknown) => e);
      expect(error).toBeInstanceOf(path.anonymousError === 'LockNotHeldError' ? LockNotHeldError : LockedError);
      // The holder's label, as Model.lock refused by the same lock reports it (issue 18, item 5).
      if (error instanceof LockedError) expect(error.label).toBe('Holder');
      expect(await stored(f)).toEqual(before);
    });
    test('the holder writes', async () => {
      const f = await fixture(mode, variant);
      await path.run(f, 'holder');
      const after = await stored(f);
      if (path.effect === 'delete') expect(after).toBeNull();
      else expect(after?.title).toBe('written');
    });
  } else if (path.outcome === 'refused') {
    test('everyone is refused with InvalidLockArgumentError and nothing is written', async () => {
      const f = await fixture(mode, variant);
      const before = await stored(f);
      for (const actor of ['anonymous', 'holder'] as const) {
        const error = await path.run(f, actor).then(() => undefined, (e: unknown) => e);
        expect(error).toBeInstanceOf(InvalidLockArgumentError);
      }
      expect(await stored(f)).toEqual(before);
    });
  } else if (path.outcome === 'not checked') {
    test('creates new documents while another is locked', async () => {
      const f = await fixture(mode, variant);
      const created = await path.run(f, 'anonymous');
      expect(created).toBeGreaterThanOrEqual(5);
    });
  } else {
    test('is not guarded: an anonymous write lands (documented)', async () => {
      const f = await fixture(mode, variant);
      await path.run(f, 'anonymous');
      expect((await stored(f))?.title).toBe('written');
    });
  }
});

test('the table names every write method of Mongoose and of the driver collection', () => {
  const covered = new Set(WRITE_PATHS.flatMap((p) => p.methods));
  const conn0 = mongoose.createConnection();
  const surfaces: [string, object][] = [
    ['Model', mongoose.Model],
    ['Document', mongoose.Model.prototype],
    ['Query', mongoose.Query.prototype],
    ['Connection', Object.getPrototypeOf(conn0) as object],
    ['Collection', mongoose.mongo.Collection.prototype],
  ];
  const missing: string[] = [];
  for (const [surface, start] of surfaces) {
    // The effective property of every name up the prototype chain (the nearest definition wins).
    const effective = new Map<string, PropertyDescriptor>();
    for (let o: object | null = start; o && o !== Object.prototype && o !== Function.prototype; o = Object.getPrototypeOf(o) as object | null) {
      for (const name of Object.getOwnPropertyNames(o)) if (!effective.has(name)) effective.set(name, Object.getOwnPropertyDescriptor(o, name)!);
    }
    for (const [name, descriptor] of effective) {
      if (name.startsWith('_') || name.startsWith('$__') || name === 'constructor' || !WRITE_NAME.test(name)) continue;
      if (typeof descriptor.value !== 'function') continue;
      const key = `${surface}.${name}`;
      if (!covered.has(key) && NOT_WRITES[key] === undefined) missing.push(key);
    }
  }
  void conn0.close();
  expect(missing).toEqual([]);
});

test("the write guard guide's Write paths table says exactly what the table says", () => {
  const guide = readFileSync(join(__dirname, '..', '..', 'docs', 'write-guard.md'), 'utf8');
  const section = guide.split('\n## Write paths\n')[1]?.split('\n## ')[0] ?? '';
  expect(section).not.toBe('');
  const rows = section
    .split('\n')
    .filter((line) => line.startsWith('| ') && !line.startsWith('| write path') && !line.startsWith('| ---'))
    .map((line) => line.slice(2, -2).split(' | '));
  const documented = new Map(rows.map(([path, guarded]) => [path, guarded]));
  const expected = new Map<string, string>();
  for (const p of WRITE_PATHS) {
    const previous = expected.get(p.readme);
    if (previous !== undefined && previous !== p.outcome) throw new Error(`table rows for "${p.readme}" disagree: ${previous} / ${p.outcome}`);
    expected.set(p.readme, p.outcome);
  }
  expect([...documented.keys()].sort()).toEqual([...expected.keys()].sort());
  for (const [path, outcome] of expected) expect(documented.get(path)?.split(' (')[0]).toBe(outcome);
});
