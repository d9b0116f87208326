/**
 * Mongoose 9 on the active backend: Model.init() creates the collection and the schema's
 * indexes (listIndexes shows them, diffIndexes finds nothing to change), and a model can create,
 * find, update and delete.
 *
 * Sources ((*): location or wording recalled, not re-read for this audit): Mongoose's documentation (*) ("Indexes": Model.init()/createIndexes/diffIndexes; `expires`
 * creates a TTL index with expireAfterSeconds) and its source (lib/model.js); listIndexes output shape
 * from the manual ("listIndexes").
 */
import mongoose, { type Connection } from 'mongoose';
import { testUri, uniqueDbName } from './support/server';

const dbName = uniqueDbName('conf_mongoose');
let connection: Connection;

interface Item {
  title: string;
  sku: string;
  qty: number;
  tags: string[];
  lockedUntil?: Date;
}

const itemSchema = new mongoose.Schema<Item>(
  {
    title: { type: String, required: true },
    sku: { type: String, required: true, unique: true },
    qty: { type: Number, default: 0 },
    tags: { type: [String], default: [] },
    lockedUntil: { type: Date, expires: 60 },
  },
  { collection: 'items' },
);
itemSchema.index({ title: 1, qty: -1 });

beforeAll(async () => {
  connection = await mongoose.createConnection(testUri(), { dbName, autoIndex: false, autoCreate: false }).asPromise();
});

afterAll(async () => {
  await connection.dropDatabase();
  await connection.close();
});

test('Model.init() creates the collection and the indexes; listIndexes shows them', async () => {
  const Item = connection.model<Item>('ConfItem', itemSchema);
  const before = (await connection.db!.listCollections({ name: 'items' }).toArray()).length;
  expect(before).toBe(0);

  await Item.createCollection();
  await Item.init();
  await Item.createIndexes();

  const collections = await connection.db!.listCollections({ name: 'items' }).toArray();
  expect(collections.map((c) => c.name)).toEqual(['items']);

  const indexes = await connection.db!.collection('items').listIndexes().toArray();
  const byName = Object.fromEntries(indexes.map((ix) => [ix.name as string, ix]));
  expect(Object.keys(byName).sort()).toEqual(['_id_', 'lockedUntil_1', 'sku_1', 'title_1_qty_-1']);
  expect(byName._id_).toMatchObject({ key: { _id: 1 } });
  expect(byName.sku_1).toMatchObject({ key: { sku: 1 }, unique: true });
  expect(byName.lockedUntil_1).toMatchObject({ key: { lockedUntil: 1 }, expireAfterSeconds: 60 });
  expect(byName['title_1_qty_-1']).toMatchObject({ key: { title: 1, qty: -1 } });

  const diff = await Item.diffIndexes();
  expect(diff).toEqual({ toDrop: [], toCreate: [] });
});

test('create, find, update and delete through a model', async () => {
  const Item = connection.model<Item>('ConfItem', itemSchema);
  await Item.init();
  const created = await Item.create({ title: 'Widget', sku: 'W-1', qty: 3, tags: ['a'] });
  expect(created._id).toBeInstanceOf(mongoose.Types.ObjectId);
  await Item.insertMany([
    { title: 'Gadget', sku: 'G-1', qty: 10 },
    { title: 'Gizmo', sku: 'Z-1' },
  ]);

  const found = await Item.findById(created._id).lean();
  expect(found).toMatchObject({ title: 'Widget', sku: 'W-1', qty: 3, tags: ['a'] });
  expect(await Item.countDocuments()).toBe(3);
  const sorted = await Item.find({ qty: { $gte: 0 } }).sort({ qty: -1 }).select('sku -_id').lean();
  expect(sorted).toEqual([{ sku: 'G-1' }, { sku: 'W-1' }, { sku: 'Z-1' }]);

  const updated = await Item.updateOne({ sku: 'Z-1' }, { $inc: { qty: 5 }, $push: { tags: 'new' } });
  expect(updated).toMatchObject({ acknowledged: true, matchedCount: 1, modifiedCount: 1 });
  const after = await Item.findOneAndUpdate({ sku: 'W-1' }, { $set: { title: 'Widget 2' } }, { new: true }).lean();
  expect(after).toMatchObject({ title: 'Widget 2', sku: 'W-1' });

  const doc = await Item.findOne({ sku: 'G-1' });
  expect(doc).not.toBeNull();
  doc!.qty = 11;
  await doc!.save();
  expect((await Item.findOne({ sku: 'G-1' }).lean())?.qty).toBe(11);
  expect((await Item.findOne({ sku: 'Z-1' }).lean())).toMatchObject({ qty: 5, tags: ['new'] });

  const deleted = await Item.deleteOne({ sku: 'W-1' });
  expect(deleted).toMatchObject({ acknowledged: true, deletedCount: 1 });
  await doc!.deleteOne();
  expect((await Item.find().lean()).map((d) => d.sku)).toEqual(['Z-1']);
});
