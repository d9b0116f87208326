/**
 * Every way to write a document through Mongoose 8 and 9 (Model, Query, Document, Connection,
 * and the Mongoose collection under a model), what the write guard does with it, and how to
 * exercise it. __tests__/plugin/write-paths.test.ts runs this table against models, their
 * discriminators and a second connection, checks that it names every write method Mongoose and
 * the driver have, and checks the README's "Write paths" table against it.
 */
import type { Connection, Types } from 'mongoose';
import type { LockableDocument } from '../../src';
import type { WorkItem, WorkItemModel } from './work-item';

export type Outcome =
  /** Refused (LockedError) when someone else holds the lock; the holder writes. */
  | 'yes'
  /** Refused loudly, before anything is sent, for everyone (a typed error naming the way around). */
  | 'refused'
  /**
   * Creates a new document, unchecked (README, Limits, "Inserts are not checked"): a new document
   * has no lock, except one whose `_id` a holder deleted and kept locked.
   */
  | 'not checked'
  /** Not guarded (documented). */
  | 'no';

export type Actor = 'anonymous' | 'holder';

export interface WriteFixture {
  model: WorkItemModel;
  connection: Connection;
  id: Types.ObjectId;
  /** The document's `edits`, unique to the fixture: a filter on it needs a target search. */
  edits: number;
  /** The document loaded before anyone locked it (no lock attached). */
  plain: LockableDocument<WorkItem>;
  /** The document `model.lock(id, 'holder')` returned. */
  held: LockableDocument<WorkItem>;
}

export interface WritePath {
  /** Name used in test titles. */
  name: string;
  /** The first cell of the README "Write paths" row that covers this path, verbatim. */
  readme: string;
  outcome: Outcome;
  /** Mongoose/driver methods this path covers, as `Surface.method` (for the completeness check). */
  methods: string[];
  /** What the write does to the fixture document when it lands. */
  effect: 'update' | 'delete' | 'insert';
  /** Performs the write as `actor`; undefined when it cannot run on the test backend (reason given). */
  run?: (f: WriteFixture, actor: Actor) => Promise<unknown>;
  notRun?: string;
  /** The error an anonymous writer gets, when not LockedError. */
  anonymousError?: 'LockNotHeldError';
}

const update = { $set: { title: 'written' } };
const replacement = { title: 'written', status: 'open' as const, edits: 0 };
const owner = (actor: Actor) => (actor === 'holder' ? { lockOwner: 'holder' } : {});
const doc = (f: WriteFixture, actor: Actor) => (actor === 'holder' ? f.held : f.plain);
/** Mongoose's collection object under the model (Model.collection), typed loosely for raw calls. */
const mongooseCollection = (f: WriteFixture) => f.model.collection as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;

export const README_ROWS = {
  save: '`doc.save()` / `doc.$save()` of an existing document',
  saveAndUnlock: '`doc.saveAndUnlock()`',
  documentQueries: '`doc.deleteOne()`, `doc.updateOne()`, `doc.replaceOne()`',
  queries:
    '`updateOne`, `updateMany`, `replaceOne`, `deleteOne`, `deleteMany`, `findOneAndUpdate`, `findOneAndReplace`, `findOneAndDelete`, `findByIdAndUpdate`, `findByIdAndDelete`, on the model or on a query (`Model.find(filter).updateOne(update)`)',
  bulk: '`Model.bulkWrite` (every operation kind), `Model.bulkSave`',
  collection: '`Model.collection` (Mongoose\'s collection: `updateOne`, `updateMany`, `replaceOne`, `deleteOne`, `deleteMany`, `findOneAnd*`, `bulkWrite`), also as `connection.collection(name)`',
  fluentBulk: '`Model.collection.initializeOrderedBulkOp()` / `initializeUnorderedBulkOp()`',
  connectionBulk: '`connection.bulkWrite()` with an operation on a guarded model',
  twoKeys: 'a `bulkWrite` operation object with more than one key (`{ updateOne, replaceOne }`)',
  inserts: '`Model.create`, `insertOne`, `insertMany`, `new Model().save()`, `bulkWrite` `insertOne`',
  skip: 'any write with `{ skipLockCheck: true }`',
  aggregate: '`Model.aggregate()` / `connection.aggregate()` with `$merge` or `$out`',
  driver: "the driver's own objects: `Model.collection.collection`, `connection.db`, `connection.getClient()`",
  admin: '`Model.collection.drop()` / `rename()`, `connection.dropCollection()`, `dropDatabase()`',
  elsewhere: 'models without the plugin on another connection, other applications',
} as const;

const queryWrites: [string, 'update' | 'delete', (f: WriteFixture, o: object) => Promise<unknown>][] = [
  ['updateOne', 'update', (f, o) => f.model.updateOne({ _id: f.id }, update, o).exec()],
  ['updateMany', 'update', (f, o) => f.model.updateMany({ _id: f.id }, update, o).exec()],
  ['replaceOne', 'update', (f, o) => f.model.replaceOne({ _id: f.id }, replacement, o).exec()],
  ['deleteOne', 'delete', (f, o) => f.model.deleteOne({ _id: f.id }, o).exec()],
  ['deleteMany', 'delete', (f, o) => f.model.deleteMany({ _id: f.id }, o).exec()],
  ['findOneAndUpdate', 'update', (f, o) => f.model.findOneAndUpdate({ _id: f.id }, update, o).exec()],
  ['findOneAndReplace', 'update', (f, o) => f.model.findOneAndReplace({ _id: f.id }, replacement, o).exec()],
  ['findOneAndDelete', 'delete', (f, o) => f.model.findOneAndDelete({ _id: f.id }, o).exec()],
  ['findByIdAndUpdate', 'update', (f, o) => f.model.findByIdAndUpdate(f.id, update, o).exec()],
  ['findByIdAndDelete', 'delete', (f, o) => f.model.findByIdAndDelete(f.id, o).exec()],
];

/** The same writes built on a query (`Model.find(filter).updateOne(update)`, ...), with a non-_id filter. */
/** A query object with Mongoose's chainable write methods, typed loosely (their overloads differ between 8 and 9). */
type Chain = Record<string, (...args: unknown[]) => { setOptions(o: object): { exec(): Promise<unknown> }; exec(): Promise<unknown> }>;
const query = (f: WriteFixture, filter: object = {}) => f.model.find(filter) as unknown as Chain;

const chainedWrites: [string, 'update' | 'delete', (f: WriteFixture, o: object) => Promise<unknown>][] = [
  ['updateOne', 'update', (f, o) => query(f, { edits: f.edits }).updateOne({}, update).setOptions(o).exec()],
  ['updateMany', 'update', (f, o) => query(f, { edits: f.edits }).updateMany({}, update).setOptions(o).exec()],
  ['replaceOne', 'update', (f, o) => query(f, { edits: f.edits }).replaceOne({}, replacement).setOptions(o).exec()],
  ['deleteOne', 'delete', (f, o) => query(f, { edits: f.edits }).deleteOne().setOptions(o).exec()],
  ['deleteMany', 'delete', (f, o) => query(f, { edits: f.edits }).deleteMany().setOptions(o).exec()],
  ['findOneAndUpdate', 'update', (f, o) => query(f).findOneAndUpdate({ edits: f.edits }, update, o).exec()],
  ['findOneAndReplace', 'update', (f, o) => query(f).findOneAndReplace({ edits: f.edits }, replacement, o).exec()],
  ['findOneAndDelete', 'delete', (f, o) => query(f).findOneAndDelete({ edits: f.edits }, o).exec()],
  ['findByIdAndUpdate', 'update', (f, o) => query(f).findByIdAndUpdate(f.id, update, o).exec()],
  ['findByIdAndDelete', 'delete', (f, o) => query(f).findByIdAndDelete(f.id, o).exec()],
];

const bulkOps: [string, 'update' | 'delete', (f: WriteFixture) => object][] = [
  ['updateOne', 'update', (f) => ({ updateOne: { filter: { _id: f.id }, update } })],
  ['updateMany', 'update', (f) => ({ updateMany: { filter: { edits: f.edits }, update } })],
  ['replaceOne', 'update', (f) => ({ replaceOne: { filter: { _id: f.id }, replacement } })],
  ['deleteOne', 'delete', (f) => ({ deleteOne: { filter: { _id: f.id } } })],
  ['deleteMany', 'delete', (f) => ({ deleteMany: { filter: { _id: f.id } } })],
];

const collectionWrites: [string, 'update' | 'delete', (f: WriteFixture, o: object) => Promise<unknown>][] = [
  ['updateOne', 'update', (f, o) => mongooseCollection(f).updateOne({ _id: f.id }, update, o)],
  ['updateMany', 'update', (f, o) => mongooseCollection(f).updateMany({ _id: f.id }, update, o)],
  ['replaceOne', 'update', (f, o) => mongooseCollection(f).replaceOne({ _id: f.id }, replacement, o)],
  ['deleteOne', 'delete', (f, o) => mongooseCollection(f).deleteOne({ _id: f.id }, o)],
  ['deleteMany', 'delete', (f, o) => mongooseCollection(f).deleteMany({ _id: f.id }, o)],
  ['findOneAndUpdate', 'update', (f, o) => mongooseCollection(f).findOneAndUpdate({ _id: f.id }, update, o)],
  ['findOneAndReplace', 'update', (f, o) => mongooseCollection(f).findOneAndReplace({ _id: f.id }, replacement, o)],
  ['findOneAndDelete', 'delete', (f, o) => mongooseCollection(f).findOneAndDelete({ _id: f.id }, o)],
  ['bulkWrite', 'update', (f, o) => mongooseCollection(f).bulkWrite([{ updateOne: { filter: { _id: f.id }, update } }], o)],
];

export const WRITE_PATHS: WritePath[] = [
  {
    name: 'doc.save()',
    readme: README_ROWS.save,
    outcome: 'yes',
    methods: ['Document.save'],
    effect: 'update',
    run: (f, actor) => {
      const d = doc(f, actor);
      d.title = 'written';
      return d.save();
    },
  },
  {
    name: 'doc.$save()',
    readme: README_ROWS.save,
    outcome: 'yes',
    methods: ['Document.$save'],
    effect: 'update',
    run: (f, actor) => {
      const d = doc(f, actor);
      d.title = 'written';
      return (d as unknown as { $save(): Promise<unknown> }).$save();
    },
  },
  {
    name: 'doc.saveAndUnlock()',
    readme: README_ROWS.saveAndUnlock,
    outcome: 'yes',
    methods: [],
    effect: 'update',
    anonymousError: 'LockNotHeldError',
    run: (f, actor) => {
      const d = doc(f, actor);
      d.title = 'written';
      return d.saveAndUnlock();
    },
  },
  { name: 'doc.deleteOne()', readme: README_ROWS.documentQueries, outcome: 'yes', methods: ['Document.deleteOne'], effect: 'delete', run: (f, actor) => doc(f, actor).deleteOne() },
  { name: 'doc.updateOne()', readme: README_ROWS.documentQueries, outcome: 'yes', methods: ['Document.updateOne'], effect: 'update', run: (f, actor) => doc(f, actor).updateOne(update).exec() },
  { name: 'doc.replaceOne()', readme: README_ROWS.documentQueries, outcome: 'yes', methods: ['Document.replaceOne'], effect: 'update', run: (f, actor) => doc(f, actor).replaceOne(replacement).exec() },
  ...queryWrites.map(([method, effect, write]): WritePath => ({
    name: `Model.${method}`,
    readme: README_ROWS.queries,
    outcome: 'yes',
    methods: [`Model.${method}`],
    effect,
    run: (f, actor) => write(f, owner(actor)),
  })),
  ...chainedWrites.map(([method, effect, write]): WritePath => ({
    name: `Query.${method}`,
    readme: README_ROWS.queries,
    outcome: 'yes',
    methods: [`Query.${method}`],
    effect,
    run: (f, actor) => write(f, owner(actor)),
  })),
  ...bulkOps.map(([kind, effect, op]): WritePath => ({
    name: `Model.bulkWrite ${kind}`,
    readme: README_ROWS.bulk,
    outcome: 'yes',
    methods: ['Model.bulkWrite'],
    effect,
    run: (f, actor) => f.model.bulkWrite([op(f) as never], owner(actor)),
  })),
  {
    name: 'Model.bulkSave',
    readme: README_ROWS.bulk,
    outcome: 'yes',
    methods: ['Model.bulkSave', 'Model.buildBulkWriteOperations'],
    effect: 'update',
    run: (f, actor) => {
      // A document from Model.lock is refused by bulkSave (it cannot check the acquisition): the
      // holder writes a copy loaded without the lock, as its owner.
      const d = f.plain;
      d.title = 'written';
      return f.model.bulkSave([d], owner(actor) as never);
    },
  },
  ...collectionWrites.map(([method, effect, write]): WritePath => ({
    name: `Model.collection.${method}`,
    readme: README_ROWS.collection,
    outcome: 'yes',
    methods: [`Collection.${method}`],
    effect,
    run: (f, actor) => write(f, owner(actor)),
  })),
  {
    name: 'connection.collection(name).updateOne',
    readme: README_ROWS.collection,
    outcome: 'yes',
    methods: ['Connection.collection'],
    effect: 'update',
    run: (f, actor) => (f.connection.collection(f.model.collection.collectionName) as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>).updateOne({ _id: f.id }, update, owner(actor)),
  },
  {
    name: 'Model.collection.initializeOrderedBulkOp()',
    readme: README_ROWS.fluentBulk,
    outcome: 'refused',
    methods: ['Collection.initializeOrderedBulkOp'],
    effect: 'update',
    run: async (f) => {
      const bulk = (f.model.collection as unknown as { initializeOrderedBulkOp(): { find(q: object): { updateOne(u: object): void }; execute(): Promise<unknown> } }).initializeOrderedBulkOp();
      bulk.find({ _id: f.id }).updateOne(update);
      return bulk.execute();
    },
  },
  {
    name: 'Model.collection.initializeUnorderedBulkOp()',
    readme: README_ROWS.fluentBulk,
    outcome: 'refused',
    methods: ['Collection.initializeUnorderedBulkOp'],
    effect: 'update',
    run: async (f) => {
      const bulk = (f.model.collection as unknown as { initializeUnorderedBulkOp(): { find(q: object): { deleteOne(): void }; execute(): Promise<unknown> } }).initializeUnorderedBulkOp();
      bulk.find({ _id: f.id }).deleteOne();
      return bulk.execute();
    },
  },
  {
    name: 'connection.bulkWrite()',
    readme: README_ROWS.connectionBulk,
    outcome: 'refused',
    methods: ['Connection.bulkWrite'],
    effect: 'update',
    run: (f) => (f.connection as unknown as { bulkWrite(ops: object[]): Promise<unknown> }).bulkWrite([{ model: f.model.modelName, name: 'updateOne', filter: { _id: f.id }, update }]),
  },
  {
    name: 'bulkWrite operation with two keys',
    readme: README_ROWS.twoKeys,
    outcome: 'refused',
    methods: [],
    effect: 'update',
    run: (f) => f.model.bulkWrite([{ deleteOne: { filter: { title: 'nothing' } }, updateOne: { filter: { _id: f.id }, update } } as never]),
  },
  {
    name: 'Model.create / insertOne / insertMany / new Model().save() / bulkWrite insertOne',
    readme: README_ROWS.inserts,
    outcome: 'not checked',
    methods: ['Model.create', 'Model.insertOne', 'Model.insertMany', 'Collection.insertOne', 'Collection.insertMany'],
    effect: 'insert',
    run: async (f) => {
      await f.model.create({ title: 'new' });
      await f.model.insertOne({ title: 'new' });
      await f.model.insertMany([{ title: 'new' }]);
      await new f.model({ title: 'new' }).save();
      await f.model.bulkWrite([{ insertOne: { document: { title: 'new', status: 'open', edits: 0 } } }]);
      return f.model.countDocuments({ title: 'new' });
    },
  },
  {
    name: 'skipLockCheck',
    readme: README_ROWS.skip,
    outcome: 'no',
    methods: [],
    effect: 'update',
    run: (f) => f.model.updateOne({ _id: f.id }, update, { skipLockCheck: true } as Record<string, unknown>).exec(),
  },
  {
    name: 'aggregate with $merge / $out',
    readme: README_ROWS.aggregate,
    outcome: 'no',
    methods: ['Model.aggregate', 'Connection.aggregate', 'Collection.aggregate'],
    effect: 'update',
    notRun: 'the test backend may not run $merge / $out (the emulator answers NotImplemented); listed as unguarded',
  },
  {
    name: "the driver's collection (Model.collection.collection)",
    readme: README_ROWS.driver,
    outcome: 'no',
    methods: [],
    effect: 'update',
    run: (f) => f.connection.getClient().db(f.connection.name).collection(f.model.collection.collectionName).updateOne({ _id: f.id }, update),
  },
  {
    name: 'drop / rename / dropCollection / dropDatabase',
    readme: README_ROWS.admin,
    outcome: 'no',
    methods: ['Collection.drop', 'Collection.rename', 'Connection.dropCollection', 'Connection.dropDatabase'],
    effect: 'delete',
    notRun: 'would destroy the shared fixture; listed as unguarded',
  },
  {
    name: 'models without the plugin on another connection',
    readme: README_ROWS.elsewhere,
    outcome: 'no',
    methods: [],
    effect: 'update',
    notRun: 'exercised by the driver-collection row: the same commands, from a connection the plugin never saw',
  },
];

/**
 * Methods whose names look like writes (see WRITE_NAME) but do not write a document, with why.
 * The completeness check requires every such method to be either a write path above or here.
 */
export const NOT_WRITES: Record<string, string> = {
  'Model.createCollection': 'creates the collection (no document)',
  'Model.createIndexes': 'index management',
  'Model.createSearchIndex': 'index management',
  'Model.createSearchIndexes': 'index management',
  'Model.updateSearchIndex': 'index management',
  'Model.dropSearchIndex': 'index management',
  'Model.distinct': 'a read',
  'Model.startSession': 'starts a session; writes in it are guarded per path',
  'Model.removeListener': 'event emitter',
  'Model.removeAllListeners': 'event emitter',
  'Document.increment': 'marks the version for the next save()',
  'Document.$inc': 'changes the instance; the next save() writes it',
  'Document.overwrite': 'changes the instance; the next save() writes it',
  'Document.$isDeleted': 'reads or sets a flag on the instance',
  'Document.$session': 'reads or sets the instance\'s session',
  'Document.$createModifiedPathsSnapshot': 'instance state',
  'Document.removeListener': 'event emitter',
  'Document.removeAllListeners': 'event emitter',
  'Document.$removeListener': 'event emitter',
  'Document.$removeAllListeners': 'event emitter',
  'Query.distinct': 'a read',
  'Query.getUpdate': 'reads the query',
  'Query.setUpdate': 'sets the query',
  'Query.merge': 'merges another query into this one',
  'Query.writeConcern': 'sets an option',
  'Query.session': 'sets the session; the write is guarded per path',
  'Query.collection': 'sets the collection of the query',
  'Query.isPathSelectedInclusive': 'projection helper',
  'Query.selectedInclusively': 'projection helper',
  'Connection.createCollection': 'creates a collection (no document)',
  'Connection.createCollections': 'creates collections (no document)',
  'Connection.createClient': 'opens the connection',
  'Connection.deleteModel': 'forgets a model (no document)',
  'Connection.listCollections': 'a read',
  'Connection.removeDb': 'forgets a child connection',
  'Connection.startSession': 'starts a session; writes in it are guarded per path',
  'Connection.transaction': 'runs a transaction; writes in it are guarded per path and commit or abort with it',
  'Connection.withSession': 'runs with a session; writes in it are guarded per path',
  'Connection.useDb': 'another database on the same client: its models are guarded like any other',
  'Connection.removeListener': 'event emitter',
  'Connection.removeAllListeners': 'event emitter',
  'Collection.createIndex': 'index management',
  'Collection.createIndexes': 'index management',
  'Collection.createSearchIndex': 'index management',
  'Collection.createSearchIndexes': 'index management',
  'Collection.updateSearchIndex': 'index management',
  'Collection.dropIndex': 'index management',
  'Collection.dropIndexes': 'index management',
  'Collection.dropSearchIndex': 'index management',
  'Collection.distinct': 'a read',
};

/** Names that may write: checked against the table. */
export const WRITE_NAME = /update|delete|remove|replace|save|insert|create|bulk|write|inc|overwrite|drop|rename|merge|aggregate|transaction|session|collection/i;
