/**
 * The document `Model.lock` returns is exactly the one `Model.findById(id).read('primary').session(null)` returns
 * (outside any transaction: src/document-load.ts)
 * (issue 16, Performance: the load may skip Mongoose's query machinery only where that machinery
 * cannot change the result; src/document-load.ts lists what findById does, from Mongoose's source).
 *
 * For each schema below, the same stored document is loaded both ways and compared: class,
 * `toObject()` with and without getters and virtuals, `toJSON()`, `isNew`, `isModified()`, the
 * modified paths, `$locals`, the session, per path `isInit` / `isSelected` / `$isDefault` /
 * `populated`, Mongoose's selection and path states, the changes the same edit then makes, and the
 * arguments Mongoose's collection `findOne` received (filter as BSON bytes, options). Each case
 * also says which load it must take (the direct one, or findById because of a hook or an option),
 * counted by the collection calls Mongoose's queries make during the lock (observe), so a case cannot pass by accident on
 * the other path. The cases whose result depends on the query machinery (a soft-delete
 * `pre('findOne')` hook, `select: false`, a discriminator child's key filter, a schema collation,
 * a populate hook) each include a document that the two paths would load differently.
 */
import { channel, tracingChannel } from 'node:diagnostics_channel';
import mongoose, { Schema, Types, mongo, type Connection, type HydratedDocument, type Model } from 'mongoose';
import { LockTargetNotFoundError, lockPlugin, type LockMethods } from '../../src';
import { directLoadProblem } from '../../src/document-load';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { replicaSetOnly } from '../support/topology';
import { testUri } from '../../test-backend/test-env';

type AnyDoc = HydratedDocument<Record<string, unknown>> & LockMethods;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyModel = Model<any>;
interface Lockable extends AnyModel {
  lock(id: unknown, owner: string): Promise<AnyDoc>;
  isLocked(id: unknown): Promise<boolean>;
  forceUnlock(id: unknown): Promise<boolean>;
  lockModel(): AnyModel;
}

const db = testDatabase('docload');
let conn: MonitoredConnection;
let counter = 0;

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

/** Internals of a document compared besides its public API (lib/internal.js, lib/stateMachine.js). */
interface DocumentInternals {
  $__: { selected?: unknown; exclude?: unknown; activePaths: { getStatePaths(state: string): Record<string, boolean> } };
}

function snapshot(doc: AnyDoc): Record<string, unknown> {
  const paths = Object.keys(doc.schema.paths);
  const internals = (doc as unknown as DocumentInternals).$__;
  return {
    model: (doc.constructor as AnyModel).modelName,
    isNew: doc.isNew,
    plain: doc.toObject(),
    withGetters: doc.toObject({ getters: true, virtuals: true }),
    json: JSON.stringify(doc),
    isModified: doc.isModified(),
    modifiedPaths: doc.modifiedPaths(),
    locals: { ...doc.$locals },
    session: doc.$session(),
    changes: doc.getChanges(),
    perPath: Object.fromEntries(
      paths.map((path) => [path, { init: doc.isInit(path), selected: doc.isSelected(path), isDefault: doc.$isDefault(path), populated: doc.populated(path) !== undefined }]),
    ),
    selected: internals.selected,
    exclude: internals.exclude,
    states: Object.fromEntries(['require', 'modify', 'init', 'default', 'ignore'].map((state) => [state, Object.keys(internals.activePaths.getStatePaths(state)).sort()])),
  };
}

/** A model compiled on the shared connection, typed loosely. */
function compiled(name: string, schema: Schema): AnyModel {
  return conn.connection.model(name, schema) as unknown as AnyModel;
}

interface FindOneCall {
  filter: Buffer;
  options: unknown;
}

/** Mongoose's Query module (the file whose frames mark a collection call made by a query). */
const QUERY_MODULE = require.resolve('mongoose/lib/query.js');

/**
 * Records what Mongoose's collection `findOne` receives while `fn` runs, and how many collection
 * calls Mongoose's queries made (findById's load, populate's queries). Counted through Mongoose's
 * `debug` option, which every Mongoose collection method calls synchronously before it sends
 * (lib/drivers/node-mongodb-native/collection.js, iter): a call whose stack runs through
 * lib/query.js was made by a Query (`Query.prototype._findOne` calls `mongooseCollection.findOne`);
 * the direct load calls the collection itself. Not by wrapping `Query.prototype.exec`: the lock
 * takes findById's path whenever Mongoose's own Query methods are replaced (document-load.ts,
 * mongoosePristine), so a spy there would decide which path it measures.
 */
async function observe<T>(model: AnyModel, fn: () => Promise<T>): Promise<{ result: T; calls: FindOneCall[]; execs: number }> {
  const collection = model.collection as unknown as { findOne: (...args: unknown[]) => unknown };
  const original = collection.findOne;
  const calls: FindOneCall[] = [];
  collection.findOne = function findOne(this: unknown, ...args: unknown[]) {
    calls.push({ filter: Buffer.from(mongo.BSON.serialize(args[0] as mongo.Document)), options: args[1] });
    return original.apply(this, args);
  };
  const base = model.base as unknown as { options: { debug?: unknown } };
  const debugBefore = base.options.debug;
  let execs = 0;
  base.options.debug = () => {
    if (new Error().stack?.includes(QUERY_MODULE)) execs++;
  };
  try {
    const result = await fn();
    return { result, calls, execs };
  } finally {
    base.options.debug = debugBefore;
    collection.findOne = original;
  }
}

interface Case {
  name: string;
  /** Whether the lock must load directly (true) or through findById (false). */
  direct: boolean;
  schema: () => Schema;
  /** The stored documents to compare, written with the driver (so defaults are missing where a test wants them applied on init). */
  stored: (ids: IdFactory) => Record<string, unknown>[];
  /** The same edit applied to both documents after loading. */
  edit?: (doc: AnyDoc) => void;
  /** Extra setup on the model (discriminators); returns the model to lock through. */
  model?: (model: AnyModel) => AnyModel;
  /** Ids for which findById returns null (the lock must throw LockTargetNotFoundError and leave no lock). */
  missing?: (ids: IdFactory) => unknown[];
  /** Options for the Mongoose instance (global options): the case then runs on its own Mongoose. */
  mongooseOptions?: Record<string, unknown>;
  /**
   * The schema sets `lean`: findById alone would return a plain object (the Query constructor's
   * setOptions({}) copies the schema's `lean`), and a lock call returns a document, so the
   * reference is `findById(id).read('primary').lean(false)`.
   */
  leanSchema?: boolean;
}

type IdFactory = () => Types.ObjectId;

const author = new Types.ObjectId();

const cases: Case[] = [
  {
    name: 'a plain schema',
    direct: true,
    schema: () => new Schema({ title: String, n: Number }),
    stored: (id) => [{ _id: id(), title: 'plain', n: 1 }, { _id: id() }],
    edit: (doc) => doc.set('n', 2),
  },
  {
    name: 'defaults applied on init, timestamps, a version key',
    direct: true,
    schema: () =>
      new Schema(
        {
          title: String,
          status: { type: String, default: 'open' },
          tags: { type: [String], default: ['new'] },
          due: { type: Date, default: () => new Date('2030-01-01T00:00:00Z') },
          nested: { flag: { type: Boolean, default: true } },
        },
        { timestamps: true },
      ),
    stored: (id) => [{ _id: id(), title: 'no defaults stored' }, { _id: id(), title: 'all stored', status: 'done', tags: [], due: new Date(0), nested: { flag: false }, __v: 3 }],
    edit: (doc) => doc.set('status', 'edited'),
  },
  {
    name: 'getters, setters, virtuals, aliases',
    direct: true,
    schema: () => {
      const schema = new Schema(
        {
          cents: { type: Number, get: (v: number) => (v === undefined ? v : v / 100), set: (v: number) => Math.round(v * 100), alias: 'price' },
          name: { type: String, lowercase: true, trim: true, alias: 'label' },
        },
        { toJSON: { getters: true, virtuals: true }, toObject: { getters: false } },
      );
      schema.virtual('shout').get(function (this: { name?: string }) {
        return this.name?.toUpperCase();
      });
      return schema;
    },
    stored: (id) => [{ _id: id(), cents: 1999, name: '  Mixed Case  ' }],
    edit: (doc) => doc.set('price', 5),
  },
  {
    name: 'maps, embedded documents, document arrays, arrays',
    direct: true,
    schema: () =>
      new Schema({
        attributes: { type: Map, of: String },
        counts: { type: Map, of: Number, default: () => new Map([['a', 1]]) },
        address: new Schema({ city: String, zip: { type: String, default: '00000' } }),
        lines: [new Schema({ sku: String, qty: { type: Number, default: 1 } })],
        numbers: [Number],
        mixed: Schema.Types.Mixed,
      }),
    stored: (id) => [{ _id: id(), attributes: { color: 'red' }, address: { _id: id(), city: 'Oslo' }, lines: [{ _id: id(), sku: 'x' }, { _id: id(), sku: 'y', qty: 3 }], numbers: [1, 2], mixed: { any: ['thing'] } }],
    edit: (doc) => {
      doc.set('lines.0.qty', 7);
      doc.set('attributes.size', 'L');
    },
  },
  {
    name: "a post('init') hook",
    direct: true,
    schema: () => {
      const schema = new Schema({ title: String, loadedAs: String });
      schema.post('init', function (this: AnyDoc) {
        this.$locals.inits = ((this.$locals.inits as number | undefined) ?? 0) + 1;
        this.set('loadedAs', `loaded ${String(this.get('title'))}`);
      });
      return schema;
    },
    stored: (id) => [{ _id: id(), title: 'hooked' }],
  },
  {
    name: "a pre('findOne') soft-delete hook",
    direct: false,
    schema: () => {
      const schema = new Schema({ title: String, deletedAt: Date });
      schema.pre('findOne', function (this: mongoose.Query<unknown, unknown>) {
        this.where({ deletedAt: null });
      });
      return schema;
    },
    stored: (id) => [{ _id: id(), title: 'live' }],
    missing: () => [softDeleted],
  },
  {
    name: "a pre('findOne') hook that populates",
    direct: false,
    schema: () => {
      const schema = new Schema({ title: String, author: { type: Schema.Types.ObjectId, ref: 'LoadAuthor' } });
      schema.pre('findOne', function (this: mongoose.Query<unknown, unknown>) {
        this.populate('author');
      });
      return schema;
    },
    stored: (id) => [{ _id: id(), title: 'with author', author }],
  },
  {
    name: 'select: false paths',
    direct: false,
    schema: () => new Schema({ title: String, secret: { type: String, select: false }, inner: new Schema({ hidden: { type: String, select: false }, shown: String }) }),
    stored: (id) => [{ _id: id(), title: 'visible', secret: 's3cret', inner: { _id: id(), hidden: 'h', shown: 'v' } }],
  },
  {
    name: 'the base model of discriminators',
    direct: true,
    schema: () => new Schema({ title: String }, { discriminatorKey: 'kind' }),
    model: (base) => {
      base.discriminator(`LoadCircle${counter}`, new Schema({ r: { type: Number, default: 1 } }));
      return base;
    },
    stored: (id) => [{ _id: id(), title: 'a circle', kind: `LoadCircle${counter}` }, { _id: id(), title: 'a plain one' }],
  },
  {
    name: 'a discriminator model (its key filters the load)',
    direct: false,
    schema: () => new Schema({ title: String }, { discriminatorKey: 'kind' }),
    model: (base) => base.discriminator(`LoadSquare${counter}`, new Schema({ side: { type: Number, default: 2 } })) as unknown as AnyModel,
    stored: (id) => [{ _id: id(), title: 'a square', kind: `LoadSquare${counter}` }],
    missing: () => [notASquare],
  },
  {
    name: 'Decimal128 ids',
    direct: true,
    schema: () => new Schema({ _id: Schema.Types.Decimal128, title: String }),
    stored: () => [{ _id: mongo.Decimal128.fromString('12.50'), title: 'decimal' }],
  },
  {
    name: 'Buffer ids',
    direct: true,
    schema: () => new Schema({ _id: Buffer, title: String }),
    stored: () => [{ _id: new mongo.Binary(Buffer.from('buffer-id')), title: 'buffer' }, { _id: new mongo.Binary(Buffer.from('uuid-like-bytes!'), 4), title: 'subtype 4' }],
  },
  {
    name: 'UUID ids',
    direct: true,
    schema: () => new Schema({ _id: Schema.Types.UUID, title: String }),
    stored: () => [{ _id: new mongo.UUID('6f9619ff-8b86-4d11-b42d-00c04fc964ff'), title: 'uuid' }],
  },
  {
    name: 'string ids with setters',
    direct: false,
    schema: () => new Schema({ _id: { type: String, lowercase: true, trim: true }, title: String }),
    stored: () => [{ _id: 'sku-1', title: 'string id' }],
  },
  {
    name: "Mongoose's global maxTimeMS",
    direct: false,
    mongooseOptions: { maxTimeMS: 60_000 },
    schema: () => new Schema({ title: String }),
    stored: (id) => [{ _id: id(), title: 'global option' }],
  },
  {
    // Mongoose's query-related global options (lib/validOptions.js) as _castConditions,
    // _applyTranslateAliases and _applyPaths read them: none changes the filter `{ _id: <cast id> }`
    // or adds a projection, so the load stays direct and must still equal findById's document.
    name: 'global sanitizeFilter, strictQuery, translateAliases, sanitizeProjection, strict, selectPopulatedPaths',
    direct: true,
    mongooseOptions: { sanitizeFilter: true, strictQuery: 'throw', translateAliases: true, sanitizeProjection: true, strict: 'throw', selectPopulatedPaths: false },
    schema: () => new Schema({ title: { type: String, alias: 'heading' }, n: Number }),
    stored: (id) => [{ _id: id(), title: 'aliased', n: 1, notInSchema: 'kept by init' }],
    edit: (doc) => doc.set('heading', 'renamed'),
  },
  {
    // Schema options a query or a document reads: `lean` (Query.setOptions, which findById calls
    // with no options, so it returns early), `read` (overridden by .read('primary')), strictQuery,
    // translateAliases, selectPopulatedPaths, and the document's own: id, versionKey, minimize,
    // strict: false with stored fields outside the schema, custom timestamps, toObject/toJSON transforms.
    name: 'schema options: lean, read, strictQuery, translateAliases, id, versionKey, minimize, strict, transforms',
    direct: true,
    leanSchema: true,
    schema: () =>
      new Schema(
        { title: { type: String, alias: 'heading' }, empty: { type: Object, default: () => ({}) }, nested: { a: String } },
        {
          lean: true,
          read: 'secondaryPreferred',
          strictQuery: 'throw',
          translateAliases: true,
          selectPopulatedPaths: false,
          id: false,
          versionKey: '_rev',
          minimize: false,
          strict: false,
          timestamps: { createdAt: 'born', updatedAt: false },
          toObject: { transform: (_doc: unknown, ret: Record<string, unknown>) => ({ ...ret, transformed: 'object' }) },
          toJSON: { versionKey: false, transform: (_doc: unknown, ret: Record<string, unknown>) => ({ ...ret, transformed: 'json' }) },
        } as mongoose.SchemaOptions,
      ),
    stored: (id) => [{ _id: id(), title: 'options', _rev: 4, free: { form: [1, 2] }, nested: {} }, { _id: id() }],
    edit: (doc) => doc.set('free.form', [3]),
  },
  {
    // The findById load of a model whose schema sets `lean` (a hook forces it): still a document.
    name: "a schema with lean: true and a pre('findOne') hook (the load is findById(...).lean(false))",
    direct: false,
    leanSchema: true,
    schema: () => {
      const schema = new Schema({ title: String, deletedAt: Date }, { lean: true } as mongoose.SchemaOptions);
      schema.pre('findOne', function (this: mongoose.Query<unknown, unknown>) {
        this.where({ deletedAt: null });
      });
      return schema;
    },
    stored: (id) => [{ _id: id(), title: 'lean schema' }],
    missing: () => [softDeleted],
  },
  {
    // Schema.pre with a RegExp registers the hook under every matching name, 'findOne' included.
    name: 'a query hook registered with a RegExp (/^find/)',
    direct: false,
    schema: () => {
      const schema = new Schema({ title: String, deletedAt: Date });
      schema.pre(/^find/, function (this: mongoose.Query<unknown, unknown>) {
        this.where({ deletedAt: null });
      });
      return schema;
    },
    stored: (id) => [{ _id: id(), title: 'live' }],
    missing: () => [softDeleted],
  },
  {
    name: "a post('findOne') hook that edits the document",
    direct: false,
    schema: () => {
      const schema = new Schema({ title: String, seen: Number });
      schema.post('findOne', function (doc: AnyDoc | null) {
        if (doc) doc.set('seen', 1);
      });
      return schema;
    },
    stored: (id) => [{ _id: id(), title: 'post hook' }],
  },
  {
    // findById runs the 'findOne' op: a hook on 'find' alone does not run, so a document that hook
    // would hide is still loaded, by findById and by the lock.
    name: "a pre('find') hook only (findById does not run it)",
    direct: true,
    schema: () => {
      const schema = new Schema({ title: String, deletedAt: Date });
      schema.pre('find', function (this: mongoose.Query<unknown, unknown>) {
        this.where({ deletedAt: null });
      });
      return schema;
    },
    stored: (id) => [{ _id: id(), title: 'soft-deleted, yet findById loads it', deletedAt: new Date(0) }],
  },
  {
    // createModel applies the discriminator's `select: false` paths to the selection of a document
    // the base model loads (lib/queryHelpers.js createModel, applyPaths on userProvidedFields).
    name: "a discriminator's select: false path, loaded through the base model",
    direct: false,
    schema: () => new Schema({ title: String }, { discriminatorKey: 'kind' }),
    model: (base) => {
      base.discriminator(`LoadSecretive${counter}`, new Schema({ pin: { type: String, select: false } }));
      return base;
    },
    stored: (id) => [{ _id: id(), title: 'secretive', kind: `LoadSecretive${counter}`, pin: '1234' }, { _id: id(), title: 'plain' }],
  },
  {
    name: 'select: false on a map',
    direct: false,
    schema: () => new Schema({ title: String, codes: { type: Map, of: String, select: false } }),
    stored: (id) => [{ _id: id(), title: 'map', codes: { a: 'x' } }],
  },
  {
    name: 'select: false on the elements of an array',
    direct: false,
    schema: () => new Schema({ title: String, tokens: [{ type: String, select: false }] }),
    stored: (id) => [{ _id: id(), title: 'array', tokens: ['t1', 't2'] }],
  },
  {
    name: 'select: false in a nested path of a document array',
    direct: false,
    schema: () => new Schema({ title: String, lines: [new Schema({ sku: String, cost: { type: Number, select: false } })] }),
    stored: (id) => [{ _id: id(), title: 'lines', lines: [{ _id: id(), sku: 'a', cost: 3 }] }],
  },
];

// Documents the two loads would treat differently unless the load honours the hook or the filter.
const softDeleted = new Types.ObjectId();
const notASquare = new Types.ObjectId();

/** The model of one case, on the shared connection or on a Mongoose instance of its own. */
async function caseModel(c: Case, schema: Schema, name: string): Promise<{ model: AnyModel; connection: Connection; close(): Promise<void> }> {
  if (!c.mongooseOptions) return { model: conn.connection.model(name, schema) as unknown as AnyModel, connection: conn.connection, close: async () => undefined };
  const own = new mongoose.Mongoose(c.mongooseOptions as mongoose.MongooseOptions);
  const connection = own.createConnection(testUri(), { dbName: db.name });
  await connection.asPromise();
  // The schema was built with the default Mongoose's Schema; the other instance compiles it all the same.
  return { model: connection.model(name, schema) as unknown as AnyModel, connection, close: () => connection.close() };
}

describe.each(cases)('the locked document equals findById(id).read(primary): $name', (c) => {
  test('field for field, and the load took the expected path', async () => {
    counter++;
    const schema = c.schema();
    schema.plugin(lockPlugin, { ttl: 30_000 });
    const { model: base, close } = await caseModel(c, schema, `Load${counter}`);
    try {
      const model = (c.model ? c.model(base) : base) as Lockable;
      await base.init();
      if (c.name.includes('populates')) {
        const Author = conn.connection.models.LoadAuthor ?? conn.connection.model('LoadAuthor', new Schema({ name: String }));
        await Author.collection.insertOne({ _id: author, name: 'Ada' });
      }
      const stored = c.stored(() => new Types.ObjectId());
      await base.collection.insertMany(stored as mongo.Document[]);
      if ((c.missing?.(() => new Types.ObjectId()) ?? []).includes(softDeleted)) await base.collection.insertOne({ _id: softDeleted, title: 'gone', deletedAt: new Date() });
      if (c.name.includes('discriminator model')) await base.collection.insertOne({ _id: notASquare, title: 'plain base document' });
      expect(directLoadProblem(model) === undefined).toBe(c.direct);
      const reference = (m: AnyModel, id: unknown) => (c.leanSchema ? m.findById(id).read('primary').session(null).lean(false) : m.findById(id).read('primary').session(null));
      if (c.leanSchema) expect(await model.findById(stored[0]!._id).read('primary').exec()).not.toBeInstanceOf(mongoose.Document); // why the reference needs .lean(false)

      for (const { _id: id } of stored) {
        const expected = await observe(model, () => reference(model, id).exec() as Promise<AnyDoc | null>);
        const locked = await observe(model, () => model.lock(id, 'owner'));
        expect(expected.result).not.toBeNull();
        expect(snapshot(locked.result)).toStrictEqual(snapshot(expected.result!));
        expect(locked.calls).toHaveLength(1);
        expect(locked.calls.map((call) => call.filter.toString('hex'))).toEqual(expected.calls.map((call) => call.filter.toString('hex')));
        expect(locked.calls.map((call) => call.options)).toEqual(expected.calls.map((call) => call.options));
        // The direct load runs no query; findById's runs what findById runs (populate adds its own).
        expect(expected.execs).toBeGreaterThanOrEqual(1);
        expect(locked.execs).toBe(c.direct ? 0 : expected.execs);
        if (c.edit) {
          c.edit(locked.result);
          c.edit(expected.result!);
          expect(locked.result.getChanges()).toStrictEqual(expected.result!.getChanges());
          expect(locked.result.modifiedPaths()).toEqual(expected.result!.modifiedPaths());
        }
        await locked.result.unlock();
      }

      for (const id of c.missing?.(() => new Types.ObjectId()) ?? []) {
        expect(await base.collection.findOne({ _id: id } as mongo.Filter<mongo.Document>)).not.toBeNull(); // stored, yet findById says null
        expect(await reference(model, id).exec()).toBeNull();
        await expect(model.lock(id, 'owner')).rejects.toBeInstanceOf(LockTargetNotFoundError);
        expect(await model.isLocked(id)).toBe(false);
      }
    } finally {
      await close();
    }
  });
});

test('a schema collation, schema read and write concerns: the load is findById (the Query constructor and _optionsForExec add them)', () => {
  // Not run against the backend: the emulator does not implement collation (test-backend/emulator/FIDELITY.md).
  // With `{ locale: 'en', strength: 2 }`, findById('LOWER') finds the document 'lower'; an equality without it would not.
  const collated = compiled(`LoadCollated${++counter}`, new Schema({ _id: String }, { collation: { locale: 'en', strength: 2 } }).plugin(lockPlugin));
  expect(directLoadProblem(collated)).toBe('schema collation');
  const readConcern = compiled(`LoadReadConcern${++counter}`, new Schema({ title: String }, { readConcern: { level: 'majority' } }).plugin(lockPlugin));
  expect(directLoadProblem(readConcern)).toBe('schema readConcern');
  const writeConcern = compiled(`LoadWriteConcern${++counter}`, new Schema({ title: String }, { writeConcern: { w: 'majority' } }).plugin(lockPlugin));
  expect(directLoadProblem(writeConcern)).toBe('schema writeConcern');
});

test("a model's own hydrate, or a query helper named like a Query method findById runs: the load is findById", () => {
  const withHydrate = new Schema({ title: String });
  withHydrate.static('hydrate', function (this: AnyModel, raw: object) {
    return (mongoose.Model.hydrate as (this: AnyModel, raw: object) => unknown).call(this, raw);
  });
  expect(directLoadProblem(compiled(`LoadOwnHydrate${++counter}`, withHydrate.plugin(lockPlugin)))).toBe('findById, findOne or hydrate overridden');
  const withHelper = new Schema({ title: String });
  // A query helper is installed on the model's own Query prototype (Model.compile, applyQueryMethods).
  (withHelper.query as Record<string, unknown>).read = function read(this: mongoose.Query<unknown, unknown>) {
    return this;
  };
  expect(directLoadProblem(compiled(`LoadReadHelper${++counter}`, withHelper.plugin(lockPlugin)))).toBe('query methods overridden');
  expect(directLoadProblem(compiled(`LoadPlain${++counter}`, new Schema({ title: String }).plugin(lockPlugin)))).toBeUndefined();
});

test("a subscriber to Mongoose's query tracing sees the load as it sees findById", async () => {
  const model = conn.connection.model(`LoadTraced${++counter}`, new Schema({ title: String }).plugin(lockPlugin)) as unknown as Lockable;
  await model.init();
  const { _id: id } = await model.create({ title: 'traced' });
  const traced: string[] = [];
  const onStart = (message: unknown) => traced.push(String((message as { operation?: unknown }).operation));
  const queries = tracingChannel('mongoose:query');
  queries.start.subscribe(onStart);
  try {
    expect(directLoadProblem(model)).toBe('query tracing subscribers');
    await model.findById(id).read('primary').exec();
    const byFindById = traced.splice(0);
    const doc = await model.lock(id, 'owner');
    expect(traced).toEqual(byFindById);
    await doc.unlock();
  } finally {
    queries.start.unsubscribe(onStart);
  }
  expect(channel('tracing:mongoose:query:start').hasSubscribers).toBe(false);
  expect(directLoadProblem(model)).toBeUndefined();
});

replicaSetOnly('transactions need a replica set')(
  "inside connection.transaction() with transactionAsyncLocalStorage, the load stays outside the transaction: the document findById(id).read('primary').session(null) returns",
  async () => {
    const own = new mongoose.Mongoose({ transactionAsyncLocalStorage: true } as mongoose.MongooseOptions);
    const connection = own.createConnection(testUri(), { dbName: db.name, monitorCommands: true });
    await connection.asPromise();
    try {
      const model = connection.model(`LoadAls${++counter}`, new Schema({ title: String }).plugin(lockPlugin)) as unknown as Lockable;
      await model.init();
      await model.lockModel().init();
      const { _id: id } = await model.create({ title: 'in a transaction' });
      const finds: { txnNumber?: unknown; lsid?: { id?: mongo.Binary } }[] = [];
      connection.getClient().on('commandStarted', (event) => {
        if (event.commandName === 'find' && event.command.find === model.collection.collectionName) finds.push(event.command);
      });
      await connection.transaction(async (session) => {
        // The async-local session changes nothing of a load that never takes it: the direct load.
        expect(directLoadProblem(model)).toBeUndefined();
        const expected = (await model.findById(id).read('primary').session(null).exec()) as AnyDoc;
        const locked = await model.lock(id, 'owner');
        expect(locked.$session()).toBe(expected.$session());
        expect(locked.$session()).toBeNull();
        expect(snapshot(locked)).toStrictEqual(snapshot(expected));
        // Neither read ran in the caller's transaction (the driver sends no txnNumber, and not its session).
        expect(finds.map((find) => [find.txnNumber !== undefined, String(find.lsid?.id?.toString('hex')) === session.id?.id.toString('hex')])).toEqual([
          [false, false],
          [false, false],
        ]);
        await model.forceUnlock(id);
      });
    } finally {
      await connection.close();
    }
  },
);
