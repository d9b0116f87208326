/**
 * Defect 4 of issue 10: ways around the guard. Each write below would touch a document someone
 * else has locked; each must be refused (LockedError, nothing written) or refused loudly before
 * anything is sent (a typed error naming what cannot be guarded). Runs on both guard paths.
 */
import { Schema } from 'mongoose';
import mongoose from 'mongoose';
import { InvalidLockArgumentError, LockedError, lockPlugin, type LockPluginOptions } from '../../../src';
import type { LockableModel, LockMethods } from '../../../src';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { rawCollection } from './support';

const db = testDatabase('bypass');
let conn: MonitoredConnection;
let counter = 0;
const mongooseMajor = Number(mongoose.version.split('.')[0]);

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

interface Aliased {
  label: string;
  name?: string;
}
type AliasedModel = LockableModel<Aliased>;

describe.each([
  ["transactions: 'auto'", { ttl: 10_000 }],
  ["transactions: 'never'", { ttl: 10_000, transactions: 'never' }],
] as [string, LockPluginOptions][])('%s', (_label, options) => {
  let M: WorkItemModel;
  beforeEach(async () => {
    M = await workItemModel(conn.connection, options);
  });

  async function lockedDocument(model: WorkItemModel = M) {
    const { _id: id } = await model.create({ title: 'original' });
    await model.lock(id, 'holder');
    return { id, before: await rawCollection(model).findOne({ _id: id }) };
  }

  test("a discriminator model's bulkWrite is guarded", async () => {
    const Special = M.discriminator(`Special${++counter}`, new Schema({ extra: String })) as unknown as WorkItemModel;
    const { _id: id } = await Special.create({ title: 'original' });
    await Special.lock(id, 'holder');
    const before = await rawCollection(M).findOne({ _id: id });
    const error = await Special.bulkWrite([{ updateOne: { filter: { _id: id }, update: { $set: { title: 'bypass' } } } }]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockedError);
    expect(await rawCollection(M).findOne({ _id: id })).toEqual(before);
  });

  test('per-query strictQuery: true with a key outside the schema (Mongoose drops it: the filter becomes {}) is checked against what it really hits', async () => {
    const { id, before } = await lockedDocument();
    const error = await M.updateOne({ notInSchema: 'x' } as never, { $set: { title: 'bypass' } }, { strictQuery: true }).exec().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockedError);
    expect((error as LockedError).documentId).toEqual(id);
    expect(await rawCollection(M).findOne({ _id: id })).toEqual(before);
  });

  test('translateAliases: true with an alias in the filter is checked against the translated filter', async () => {
    const schema = new Schema<Aliased, AliasedModel, LockMethods>({ label: { type: String, alias: 'name' } });
    schema.plugin(lockPlugin, options);
    const A = conn.connection.model<Aliased, AliasedModel>(`Aliased${++counter}`, schema);
    await A.init();
    const { _id: id } = await A.create({ label: 'target' });
    await A.lock(id, 'holder');
    const error = await A.updateOne({ name: 'target' }, { $set: { label: 'bypass' } }, { translateAliases: true }).exec().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockedError);
    expect((await A.collection.findOne({ _id: id }))?.label).toBe('target');
  });

  test('a bulkWrite operation object with two keys is refused before anything is sent', async () => {
    const { id, before } = await lockedDocument();
    const { _id: free } = await M.create({ title: 'free' });
    conn.resetCommands();
    const error = await M.bulkWrite([
      { updateOne: { filter: { _id: free }, update: { $set: { title: 'x' } } }, replaceOne: { filter: { _id: id }, replacement: { title: 'bypass', status: 'open', edits: 0 } } } as never,
    ]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidLockArgumentError);
    expect((error as InvalidLockArgumentError).argument).toBe('bulkWrite operation 0');
    expect(conn.commands).toEqual([]);
    expect(await rawCollection(M).findOne({ _id: id })).toEqual(before);
    expect((await rawCollection(M).findOne({ _id: free }))?.title).toBe('free');
  });

  test('save({ middleware: false }) and doc.deleteOne({ middleware: false }) are guarded', async () => {
    const { _id: id } = await M.create({ title: 'original' });
    const plain = await M.findById(id).orFail();
    await M.lock(id, 'holder');
    const before = await rawCollection(M).findOne({ _id: id });
    plain.title = 'bypass';
    const saved = await plain.save({ middleware: false } as never).catch((e: unknown) => e);
    expect(saved).toBeInstanceOf(LockedError);
    const deleted = await plain.deleteOne({ middleware: false } as never).catch((e: unknown) => e);
    expect(deleted).toBeInstanceOf(LockedError);
    expect(await rawCollection(M).findOne({ _id: id })).toEqual(before);
  });

  test('updateOne with { middleware: { pre: false } } is guarded', async () => {
    const { id, before } = await lockedDocument();
    const error = await M.updateOne({ _id: id }, { $set: { title: 'bypass' } }).setOptions({ middleware: { pre: false } } as never).exec().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockedError);
    expect(await rawCollection(M).findOne({ _id: id })).toEqual(before);
  });

  test('updateOne with { middleware: { post: false } } on an unlocked document: the reported write is really there', async () => {
    const { _id: id } = await M.create({ title: 'original' });
    const result = await M.updateOne({ _id: id }, { $set: { title: 'kept' } }).setOptions({ middleware: { post: false } } as never).exec();
    expect(result.modifiedCount).toBe(1);
    expect((await rawCollection(M).findOne({ _id: id }))?.title).toBe('kept');
  });

  test(`(Mongoose ${mongooseMajor}) the middleware option, where Mongoose has it, still runs user hooks as asked`, async () => {
    // The guard does not live in hooks, so skipping hooks neither skips the guard nor breaks the user's request.
    const schema = new Schema({ title: String });
    let hookRuns = 0;
    schema.pre('updateOne', () => {
      hookRuns++;
    });
    schema.plugin(lockPlugin, options);
    const H = conn.connection.model(`Hooked${++counter}`, schema);
    await H.init();
    const { _id: id } = await H.create({ title: 'x' });
    await H.updateOne({ _id: id }, { $set: { title: 'y' } }).setOptions({ middleware: false } as never).exec();
    expect(hookRuns).toBe(mongooseMajor >= 9 ? 0 : 1);
    expect((await H.collection.findOne({ _id: id }))?.title).toBe('y');
  });
});
