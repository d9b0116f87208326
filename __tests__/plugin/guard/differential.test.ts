/**
 * Differential coverage of PRODUCT.md property 10 (writes to documents nobody has locked succeed
 * as they would without the plugin). Each scenario seeds the same documents into the collection
 * of a model WITHOUT the plugin and of models WITH it (`'auto'` and `'never'`), runs the same write
 * (nobody holds any lock), and compares what the write returned and what the collection holds
 * afterwards. The scenarios are the option combinations the write-path table does not exercise:
 * upserts (named and unnamed `_id`s, `_id` in a replacement, `$setOnInsert`), positional `$`,
 * `arrayFilters`, pipeline updates, `sort`, `let`, `hint`, `_id` conditions that are not
 * equalities, `$or` of ids, `$expr`. The `updateMany` upserts naming `_id`s failed under `'auto'`
 * until the guard stopped rewriting upserts into per-document statements (upsert-many.test.ts).
 *
 * Not here: a positional `$` update whose filter has an `_id` range (the guard narrows it to
 * `{ $and: [filter, { _id }] }`, which mongod accepts and the emulator on main refuses), and
 * collations (the emulator does not implement them). (From the attack run,
 * `__tests__/attack/differential.test.ts`.)
 */
import { Schema, Types, type Model } from 'mongoose';
import { lockPlugin } from '../../../src';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { outcome } from './support';

interface Item {
  _id: Types.ObjectId;
  key: string;
  n: number;
  tags: string[];
  items: { k: string; v: number }[];
}

const db = testDatabase('differential');
let conn: MonitoredConnection;
const models: Record<'plain' | 'auto' | 'never', Model<Item>> = {} as never;

function schema(plugin?: 'auto' | 'never') {
  const s = new Schema<Item>({ key: String, n: Number, tags: [String], items: [{ _id: false, k: String, v: Number }] }, { versionKey: false });
  s.index({ key: 1 });
  if (plugin) s.plugin(lockPlugin, { ttl: 30_000, transactions: plugin });
  return s;
}

beforeAll(async () => {
  conn = await connect(db.name);
  models.plain = conn.connection.model<Item>('DiffPlain', schema());
  models.auto = conn.connection.model<Item>('DiffAuto', schema('auto'));
  models.never = conn.connection.model<Item>('DiffNever', schema('never'));
  for (const m of Object.values(models)) await m.init();
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const ids = Array.from({ length: 4 }, () => new Types.ObjectId());
const absent = new Types.ObjectId();
const seed = (): Partial<Item>[] => [
  { _id: ids[0], key: 'a', n: 1, tags: ['x', 'y'], items: [{ k: 'p', v: 1 }, { k: 'q', v: 2 }] },
  { _id: ids[1], key: 'b', n: 2, tags: ['y', 'z'], items: [{ k: 'q', v: 3 }] },
  { _id: ids[2], key: 'c', n: 3, tags: ['x'], items: [] },
  { _id: ids[3], key: 'd', n: 4, tags: [], items: [{ k: 'p', v: 4 }] },
];

type Write = (M: Model<Item>) => Promise<unknown>;
const scenarios: [string, Write][] = [
  ['updateOne positional $', (M) => M.updateOne({ tags: 'y' }, { $set: { 'tags.$': 'Y' } }).exec()],
  ['updateMany positional $', (M) => M.updateMany({ tags: 'x' }, { $set: { 'tags.$': 'X' } }).exec()],
  ['updateMany arrayFilters', (M) => M.updateMany({}, { $inc: { 'items.$[e].v': 10 } }, { arrayFilters: [{ 'e.k': 'p' }] }).exec()],
  ['updateOne arrayFilters + upsert, no match', (M) => M.updateOne({ key: 'zz' }, { $set: { n: 9 } }, { upsert: true, arrayFilters: [] }).exec()],
  ['updateMany pipeline update', (M) => M.updateMany({ n: { $gte: 2 } }, [{ $set: { n: { $add: ['$n', 100] } } }], { updatePipeline: true } as never).exec()],
  ['updateOne pipeline update by _id', (M) => M.updateOne({ _id: ids[1] }, [{ $set: { n: { $multiply: ['$n', 7] } } }], { updatePipeline: true } as never).exec()],
  ['updateMany upsert, no match, filter by key', (M) => M.updateMany({ key: 'new' }, { $set: { n: 50 } }, { upsert: true }).exec()],
  ['updateMany upsert, match', (M) => M.updateMany({ key: { $in: ['a', 'b'] } }, { $inc: { n: 1 } }, { upsert: true }).exec()],
  ['updateOne upsert $setOnInsert, no match', (M) => M.updateOne({ key: 'soi' }, { $setOnInsert: { n: 7 }, $set: { tags: ['t'] } }, { upsert: true }).exec()],
  ['updateMany upsert names an absent _id', (M) => M.updateMany({ _id: absent }, { $set: { key: 'upm' } }, { upsert: true }).exec()],
  ['updateMany upsert, $in of absent _ids', (M) => M.updateMany({ _id: { $in: [absent, new Types.ObjectId('0000000000000000000000aa')] } }, { $set: { key: 'upin' } }, { upsert: true }).exec()],
  ['updateMany upsert names a present _id', (M) => M.updateMany({ _id: ids[0] }, { $inc: { n: 5 } }, { upsert: true }).exec()],
  ['updateOne upsert names an absent _id', (M) => M.updateOne({ _id: absent }, { $set: { key: 'up1' } }, { upsert: true }).exec()],
  ['replaceOne upsert, no match', (M) => M.replaceOne({ key: 'r' }, { key: 'r', n: 5, tags: [], items: [] }, { upsert: true }).exec()],
  ['replaceOne, _id in the replacement equal to the match', (M) => M.replaceOne({ key: 'b' }, { _id: ids[1], key: 'b2', n: 0, tags: [], items: [] }).exec()],
  ['findOneAndReplace upsert with _id in the replacement, no match', (M) => M.findOneAndReplace({ key: 'fr' }, { _id: absent, key: 'fr', n: 6, tags: [], items: [] }, { upsert: true, new: true }).lean().exec()],
  ['findOneAndUpdate sort + upsert, match', (M) => M.findOneAndUpdate({ tags: 'x' }, { $inc: { n: 1 } }, { sort: { n: -1 }, upsert: true, new: true }).lean().exec()],
  ['findOneAndUpdate sort, returns the old document', (M) => M.findOneAndUpdate({}, { $inc: { n: 1 } }, { sort: { n: 1 } }).lean().exec()],
  ['findOneAndDelete sort', (M) => M.findOneAndDelete({ n: { $lt: 4 } }, { sort: { n: -1 } }).lean().exec()],
  ['deleteOne with $or of ids', (M) => M.deleteOne({ $or: [{ _id: ids[2] }, { _id: ids[3] }] }).exec()],
  ['deleteMany with _id $nin', (M) => M.deleteMany({ _id: { $nin: [ids[0]] } }).exec()],
  ['updateMany with _id $not', (M) => M.updateMany({ _id: { $not: { $eq: ids[0] } } }, { $set: { n: 0 } }).exec()],
  ['updateMany with $expr', (M) => M.updateMany({ $expr: { $gt: ['$n', 2] } }, { $set: { tags: [] } }).exec()],
  ['updateMany with let', (M) => M.updateMany({ $expr: { $eq: ['$key', '$$k'] } }, [{ $set: { n: '$$v' } }], { let: { k: 'c', v: 99 }, updatePipeline: true } as never).exec()],
  ['updateMany with hint', (M) => M.updateMany({ key: { $gte: 'b' } }, { $inc: { n: 1 } }, { hint: { key: 1 } }).exec()],
  ['updateOne with an _id range (first in natural order)', (M) => M.updateOne({ _id: { $gt: ids[0] } }, { $set: { key: 'first' } }).exec()],
  ['bulkWrite mix with upserts', (M) =>
    M.bulkWrite([
      { updateOne: { filter: { key: 'bw' }, update: { $set: { n: 1 } }, upsert: true } },
      { updateMany: { filter: { _id: absent }, update: { $set: { key: 'bwm' } }, upsert: true } },
      { replaceOne: { filter: { key: 'a' }, replacement: { key: 'a', n: -1, tags: [], items: [] } } },
      { deleteOne: { filter: { key: 'd' } } },
    ])],
];

const raw = (M: Model<Item>) => conn.connection.getClient().db(db.name).collection(M.collection.collectionName);

function normalise(docs: Record<string, unknown>[]) {
  const known = new Set([...ids, absent].map(String));
  return docs
    .map((d) => ({ ...d, _id: known.has(String(d._id)) ? String(d._id) : 'generated' }))
    .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
}

function normaliseResult(value: unknown): unknown {
  const known = new Set([...ids, absent].map(String));
  return JSON.parse(JSON.stringify(value ?? null, (_k, v) => (typeof v === 'string' && /^[0-9a-f]{24}$/.test(v) && !known.has(v) ? 'generated' : v)));
}

test.each(scenarios)('%s: the guarded write does what the unguarded one does', async (_name, write) => {
  const outcomes: Record<string, unknown> = {};
  for (const [name, M] of Object.entries(models)) {
    await raw(M).deleteMany({});
    await raw(M).insertMany(seed() as never);
    const result = await outcome(write(M));
    const docs = await raw(M).find({}).toArray();
    outcomes[name] = {
      result: result.ok ? normaliseResult(result.value) : `error: ${String((result as { error: unknown }).error)}`,
      docs: normalise(docs),
    };
  }
  expect(outcomes.auto).toEqual(outcomes.plain);
  expect(outcomes.never).toEqual(outcomes.plain);
});
