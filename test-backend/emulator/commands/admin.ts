/** Namespace and index commands: create (collections, views, validators), drop, dropDatabase, listCollections, listDatabases, createIndexes, listIndexes, dropIndexes, collMod. */
import { Long, type Document } from 'bson';
import { makeQuery } from '../mingo-context';
import type { CommandCtx, Handler } from '../context';
import { Codes, MongoCommandError, toCommandError, unsupported } from '../errors';
import { formatValue, isPlainObject, keyOf } from '../values';
import { ensureColl, getColl } from '../namespaces';
import { View } from '../query';
import { validateIndexSpec } from '../index-spec';
import { validateNamespace } from '../storage/engine';
import { numericValue } from '../indexes';
import { cannotDropIndexesOnView, createView, modifyView, parseViewDefinition, viewInfos, viewNotCollection } from '../views';
import { checkValidationOptions } from '../validation';

function nsNotFound(ctx: CommandCtx, name: string): MongoCommandError {
  return new MongoCommandError(Codes.NamespaceNotFound, `ns does not exist: ${ctx.db}.${name}`);
}

function noTxn(ctx: CommandCtx): void {
  if (ctx.txn && !['create', 'createIndexes'].includes(ctx.name)) {
    throw new MongoCommandError(Codes.OperationNotSupportedInTransaction, `Cannot run '${ctx.name}' in a multi-document transaction.`);
  }
}

const CREATE_OPTIONS = new Set(['create', '$db', 'lsid', 'txnNumber', 'autocommit', 'startTransaction', '$clusterTime', 'writeConcern', '$readPreference', 'comment', 'apiVersion', 'apiStrict', 'apiDeprecationErrors', 'maxTimeMS']);

/** create's view and validation options (views.ts, validation.ts). */
const VIEW_OPTIONS = ['viewOn', 'pipeline'];
const VALIDATION_OPTIONS = ['validator', 'validationLevel', 'validationAction'];

const create: Handler = (ctx) => {
  noTxn(ctx);
  const name = ctx.cmd.create as string;
  for (const k of Object.keys(ctx.cmd)) if (!CREATE_OPTIONS.has(k) && k !== 'changeStreamPreAndPostImages' && !VIEW_OPTIONS.includes(k) && !VALIDATION_OPTIONS.includes(k)) throw unsupported(`create option '${k}'`);
  const prePost = preAndPostImagesOption(ctx, 'create');
  // ---- views and validation (views.ts, validation.ts) ----
  if (ctx.cmd.viewOn !== undefined || ctx.cmd.pipeline !== undefined) return createViewCommand(ctx, name);
  if (ctx.state.storage.getView(ctx.db, name)) throw unsupported(`create of a collection where the view ${ctx.db}.${name} exists (checkCollectionOptions' message for it is not sourced here)`);
  const validation = checkValidationOptions(ctx.cmd, 'create');
  // ---- end views and validation ----
  if (getColl(ctx.exec, ctx.db, name)) throw new MongoCommandError(Codes.NamespaceExists, `Collection ${ctx.db}.${name} already exists.`);
  if (Object.keys(validation).length) {
    if (ctx.txn) throw unsupported('create with a validator inside a transaction');
    ctx.state.storage.ensureCollection(ctx.db, name, prePost ? { ...validation, changeStreamPreAndPostImages: { enabled: true } } : validation);
    return { ok: 1 };
  }
  // Inside a transaction the new collection stays invisible outside until commit (namespaces.ts).
  ensureColl(ctx.exec, ctx.db, name, prePost ? { changeStreamPreAndPostImages: { enabled: true } } : {});
  return { ok: 1 };
};

/**
 * `changeStreamPreAndPostImages: { enabled: <bool> }` of create and collMod (manual, "create" and
 * "collMod"; jstests/core/write/write_change_stream_pit_preimage*.js,
 * jstests/noPassthrough/change_stream_pre_and_post_images_options.js). The option is listed only
 * while enabled (CollectionOptions::appendBSON). Returns the requested state, undefined if absent.
 * Refused (NotImplemented): malformed values, and the internal databases and views, which mongod
 * refuses with InvalidOptions and a message not sourced here.
 */
function preAndPostImagesOption(ctx: CommandCtx, command: string): boolean | undefined {
  const v = ctx.cmd.changeStreamPreAndPostImages;
  if (v === undefined) return undefined;
  if (!isPlainObject(v) || Object.keys(v).length !== 1 || typeof v.enabled !== 'boolean') {
    throw unsupported(`${command} with changeStreamPreAndPostImages other than { enabled: <bool> } (mongod's errors are not sourced here)`);
  }
  if (v.enabled && ['admin', 'local', 'config'].includes(ctx.db)) throw unsupported(`changeStreamPreAndPostImages on the ${ctx.db} database (mongod refuses it with InvalidOptions)`);
  if (v.enabled && ctx.cmd.viewOn !== undefined) throw unsupported('changeStreamPreAndPostImages on a view (mongod refuses it with InvalidOptions)');
  return v.enabled;
}

/**
 * create with viewOn/pipeline (views.ts): CmdCreate::typedRun's option checks, then the catalog.
 * Views with other options (collation, validators...) are refused loudly.
 */
function createViewCommand(ctx: CommandCtx, name: string): Document {
  if (ctx.cmd.viewOn === undefined) throw new MongoCommandError(Codes.InvalidOptions, "'pipeline' requires 'viewOn' to also be specified");
  for (const k of VALIDATION_OPTIONS) if (ctx.cmd[k] !== undefined) throw unsupported(`create of a view with '${k}'`);
  // createCollection (create_collection.cpp).
  if (ctx.txn) throw new MongoCommandError(Codes.OperationNotSupportedInTransaction, 'Cannot create a view in a multi-document transaction.');
  const def = parseViewDefinition('create', ctx.cmd.viewOn, ctx.cmd.pipeline);
  createView(ctx.state.storage, ctx.db, name, def, ctx.state.storage.getCollection(ctx.db, name));
  return { ok: 1 };
}

const drop: Handler = (ctx) => {
  noTxn(ctx);
  const name = ctx.cmd.drop as string;
  // drop_collection.cpp _dropView: the reply names the view (views.ts).
  if (ctx.state.storage.dropView(ctx.db, name)) return { ns: `${ctx.db}.${name}`, ok: 1 };
  const coll = ctx.state.storage.getCollection(ctx.db, name);
  const nIndexesWas = coll ? coll.allSpecs().length : undefined;
  // mongod >= 7.0 answers drop of a missing collection with ok: 1.
  ctx.state.storage.dropCollection(ctx.db, name);
  return nIndexesWas === undefined ? { ok: 1 } : { nIndexesWas, ns: `${ctx.db}.${name}`, ok: 1 };
};

const dropDatabase: Handler = (ctx) => {
  noTxn(ctx);
  ctx.state.storage.dropDatabase(ctx.db);
  return { ok: 1 };
};

const listCollections: Handler = (ctx) => {
  const nameOnly = !!ctx.cmd.nameOnly;
  let infos: Document[] = ctx.state.storage.collections(ctx.db).map((c) =>
    nameOnly
      ? { name: c.name, type: 'collection' }
      : { name: c.name, type: 'collection', options: { ...c.options }, info: { readOnly: false, uuid: c.uuid }, idIndex: { v: 2, key: { _id: 1 }, name: '_id_' } },
  );
  // Views after the collections, and system.views with them (views.ts).
  const views = viewInfos(ctx.state.storage, ctx.db, nameOnly);
  if (views.systemViews) infos.push(views.systemViews);
  infos.push(...views.views);
  if (ctx.cmd.filter && Object.keys(ctx.cmd.filter as Document).length) {
    try {
      const q = makeQuery(ctx.cmd.filter as Document);
      infos = infos.filter((d) => q.test(d));
    } catch (e) {
      throw toCommandError(e);
    }
  }
  const batchSize = (ctx.cmd.cursor as Document | undefined)?.batchSize as number | undefined;
  return ctx.state.cursors.fromArray(`${ctx.db}.$cmd.listCollections`, infos, batchSize);
};

const listDatabases: Handler = (ctx) => {
  const dbs = ctx.state.storage.databaseNames().map((name) => ({ name, sizeOnDisk: 0, empty: false }));
  if (ctx.cmd.nameOnly) return { databases: dbs.map((d) => ({ name: d.name })), ok: 1 };
  return { databases: dbs, totalSize: 0, totalSizeMb: 0, ok: 1 };
};

const createIndexes: Handler = (ctx) => {
  const name = ctx.cmd.createIndexes as string;
  const specs = ctx.cmd.indexes as Document[] | undefined;
  if (!Array.isArray(specs) || !specs.length) throw new MongoCommandError(Codes.FailedToParse, "Must specify at least one index to create");
  // CmdCreateIndexes validates every spec (parseAndValidateIndexSpecs) before it looks at the
  // collection or the transaction (index-spec.ts).
  for (const spec of specs) if (isPlainObject(spec)) validateIndexSpec(spec);
  const storage = ctx.state.storage;
  // runCreateIndexesWithCoordinator's AutoGetCollection refuses a view (views.ts).
  if (storage.getView(ctx.db, name)) throw viewNotCollection(ctx.db, name);
  const committed = storage.getCollection(ctx.db, name);
  const existed = !!getColl(ctx.exec, ctx.db, name);
  if (ctx.txn && committed) {
    // create_indexes_cmd.cpp: inside a transaction only indexes that already exist (a no-op) may be
    // "created" on a collection that exists outside it; a new index build needs an exclusive lock.
    const allExist = specs.every((s) => storage.createIndex(committed, s, { dryRun: true }) === 'exists');
    if (!allExist) {
      throw new MongoCommandError(Codes.OperationNotSupportedInTransaction, `Cannot create new indexes on existing collection ${ctx.db}.${name} in a multi-document transaction.`);
    }
  }
  if (ctx.txn && !committed && existed) {
    // runCreateIndexesOnNewCollection (src/mongo/db/commands/create_indexes_cmd.cpp): a collection
    // this transaction created takes new indexes only while it is empty (checked before the specs
    // are filtered, so an index that exists already is refused too).
    const pending = getColl(ctx.exec, ctx.db, name);
    const nonEmpty = pending !== undefined && !new View(pending, ctx.txn).all()[Symbol.iterator]().next().done;
    if (nonEmpty) {
      throw new MongoCommandError(Codes.OperationNotSupportedInTransaction, `Cannot create new indexes on non-empty collection ${ctx.db}.${name} in a multi-document transaction.`);
    }
  }
  const coll = ensureColl(ctx.exec, ctx.db, name);
  const before = coll.allSpecs().length;
  const wasEmpty = coll.docs.size === 0;
  let created = 0;
  for (const s of specs) if (storage.createIndex(coll, s, { dryRun: false, pending: !!ctx.txn && !committed }) === 'created') created++;
  // The change event(s); a transaction's new collection reports its indexes when it commits.
  if (created && !(ctx.txn && !committed)) storage.recordIndexesCreated(coll, coll.indexes.slice(before - 1).map((i) => i.spec), wasEmpty);
  const reply: Document = { numIndexesBefore: before, numIndexesAfter: coll.allSpecs().length, createdCollectionAutomatically: !existed, ok: 1 };
  if (!created) reply.note = 'all indexes already exist';
  return reply;
};

const listIndexes: Handler = (ctx) => {
  const name = ctx.cmd.listIndexes as string;
  if (ctx.state.storage.getView(ctx.db, name)) throw viewNotCollection(ctx.db, name);
  const coll = ctx.state.storage.getCollection(ctx.db, name);
  if (!coll) throw nsNotFound(ctx, name);
  const batchSize = (ctx.cmd.cursor as Document | undefined)?.batchSize as number | undefined;
  return ctx.state.cursors.fromArray(`${ctx.db}.$cmd.listIndexes.${name}`, coll.allSpecs().map((s) => ({ ...s })), batchSize);
};

const dropIndexes: Handler = (ctx) => {
  noTxn(ctx);
  const name = ctx.cmd.dropIndexes as string;
  if (ctx.state.storage.getView(ctx.db, name)) throw cannotDropIndexesOnView(ctx.db, name);
  const coll = ctx.state.storage.getCollection(ctx.db, name);
  if (!coll) throw nsNotFound(ctx, name);
  const nIndexesWas = coll.allSpecs().length;
  const which = ctx.cmd.index;
  const names: string[] = [];
  if (which === '*') names.push(...coll.indexes.map((i) => i.name));
  else if (typeof which === 'string') names.push(which);
  else if (Array.isArray(which)) names.push(...(which as string[]));
  else if (which && typeof which === 'object') {
    const idx = coll.indexes.find((i) => keyOf(i.spec.key) === keyOf(which));
    if (!idx) throw new MongoCommandError(Codes.IndexNotFound, `can't find index with key: ${JSON.stringify(which)}`);
    names.push(idx.name);
  }
  for (const n of names) {
    if (n === '_id_') throw new MongoCommandError(Codes.InvalidOptions, 'cannot drop _id index');
    if (!coll.findIndex(n)) throw new MongoCommandError(Codes.IndexNotFound, `index not found with name [${n}]`);
  }
  for (const n of names) ctx.state.storage.dropIndex(coll, n);
  return { nIndexesWas, ok: 1 };
};

/**
 * collMod, index form only: `{ collMod: <coll>, index: { name | keyPattern, expireAfterSeconds } }`
 * (manual, collMod, "Change Expiration Value for Indexes"). Checks in the order of
 * parseCollModRequest (src/mongo/db/catalog/coll_mod.cpp, 6.x/7.0) and the reply of
 * processCollModIndexRequest (src/mongo/db/catalog/coll_mod_index.cpp): `expireAfterSeconds_old`
 * (when the index had one) and `expireAfterSeconds_new`, both NumberLong, also when unchanged; an
 * index without a TTL becomes one (5.1+), except `_id` and compound indexes (InvalidOptions). The
 * value is checked by index_key_validate::validateExpireAfterSeconds (kSecondaryTTLIndex): below 0
 * is InvalidOptions. `changeStreamPreAndPostImages` and an empty collMod are handled by
 * collModOptions / preAndPostImagesOption below; validators and view definitions by
 * collModViewOrValidation (views.ts, validation.ts). Every other collMod option (hidden, unique,
 * capped...) answers NotImplemented, as do values whose refusal is not sourced here (not an
 * integer, above the 32-bit range).
 */
const COLLMOD_GENERIC = new Set(['collMod', '$db', 'lsid', 'txnNumber', '$clusterTime', 'writeConcern', '$readPreference', 'comment', 'apiVersion', 'apiStrict', 'apiDeprecationErrors', 'maxTimeMS']);

const collMod: Handler = (ctx) => {
  noTxn(ctx);
  const name = ctx.cmd.collMod;
  if (typeof name !== 'string') throw unsupported('collMod with a non-string collection name');
  for (const k of Object.keys(ctx.cmd)) if (!COLLMOD_GENERIC.has(k) && k !== 'index' && k !== 'changeStreamPreAndPostImages' && !VIEW_OPTIONS.includes(k) && !VALIDATION_OPTIONS.includes(k)) throw unsupported(`the collMod option '${k}'`);
  // ---- views and validation (views.ts, validation.ts) ----
  const viewOrValidation = [...VIEW_OPTIONS, ...VALIDATION_OPTIONS].filter((k) => ctx.cmd[k] !== undefined);
  if (viewOrValidation.length) {
    if (ctx.cmd.index !== undefined) throw unsupported(`collMod of an index together with '${viewOrValidation[0]}'`);
    return collModViewOrValidation(ctx, name);
  }
  if (ctx.state.storage.getView(ctx.db, name)) throw unsupported('collMod of an index on a view');
  // ---- end views and validation ----
  const index = ctx.cmd.index as Document | undefined;
  if (index === undefined) return collModOptions(ctx, name);
  if (!isPlainObject(index)) throw unsupported('collMod with a non-document index option');
  for (const k of Object.keys(index)) if (!['name', 'keyPattern', 'expireAfterSeconds'].includes(k)) throw unsupported(`the collMod index option '${k}'`);
  const coll = ctx.state.storage.getCollection(ctx.db, name);
  if (!coll) throw new MongoCommandError(Codes.NamespaceNotFound, 'ns does not exist');
  if (index.name !== undefined && index.keyPattern !== undefined) throw new MongoCommandError(Codes.InvalidOptions, 'Cannot specify both key pattern and name.');
  if (index.name === undefined && index.keyPattern === undefined) throw new MongoCommandError(Codes.InvalidOptions, 'Must specify either index name or key pattern.');
  if (index.name !== undefined && typeof index.name !== 'string') throw unsupported('collMod with a non-string index name');
  if (index.keyPattern !== undefined && !isPlainObject(index.keyPattern)) throw unsupported('collMod with a non-document keyPattern');
  if (index.expireAfterSeconds === undefined) throw new MongoCommandError(Codes.InvalidOptions, 'no expireAfterSeconds, hidden, unique, or prepareUnique field');
  const secs = numericValue(index.expireAfterSeconds);
  if (secs === undefined || !Number.isInteger(secs) || secs > 2147483647) throw unsupported(`collMod expireAfterSeconds ${String(index.expireAfterSeconds)} (mongod's answer is not sourced here)`);
  if (secs < 0) throw new MongoCommandError(Codes.InvalidOptions, "TTL index 'expireAfterSeconds' option cannot be less than 0");
  const ns = `${ctx.db}.${name}`;
  let spec: Document | undefined;
  if (typeof index.name === 'string') {
    spec = coll.allSpecs().find((s) => s.name === index.name);
    if (!spec) throw new MongoCommandError(Codes.IndexNotFound, `cannot find index ${index.name} for ns ${ns}`);
  } else {
    const matches = coll.allSpecs().filter((s) => keyOf(s.key) === keyOf(index.keyPattern));
    if (matches.length > 1) throw new MongoCommandError(181, `index keyPattern ${formatValue(index.keyPattern)} matches ${matches.length} indexes, must use index name. Conflicting indexes:${formatValue(matches[0])}, ${formatValue(matches[1])}`, {}, 'AmbiguousIndexKeyPattern');
    if (!matches.length) throw new MongoCommandError(Codes.IndexNotFound, `cannot find index ${formatValue(index.keyPattern)} for ns ${ns}`);
    spec = matches[0];
  }
  const old = numericValue(spec.expireAfterSeconds);
  if (old === undefined) {
    if (spec.name === '_id_') throw new MongoCommandError(Codes.InvalidOptions, 'the _id field does not support TTL indexes');
    if (Object.keys(spec.key as Document).length !== 1) throw new MongoCommandError(Codes.InvalidOptions, 'TTL indexes are single-field indexes, compound indexes do not support TTL');
  }
  const idx = coll.findIndex(spec.name as string)!;
  const prePost = preAndPostImagesOption(ctx, 'collMod');
  ctx.state.storage.setIndexExpiry(coll, idx.name, secs);
  // The `modify` event: makeCollModCmdObj names the index and gives expireAfterSeconds as a long;
  // indexOptions_old holds the index's former expireAfterSeconds, if it had one (op_observer_impl.cpp).
  const description = collModDescription(ctx, { name: idx.name, expireAfterSeconds: Long.fromNumber(secs) });
  ctx.state.storage.modifyCollection(coll, { options: withPrePost(coll.options, prePost), description, indexOptionsBefore: old === undefined ? {} : { expireAfterSeconds: Long.fromNumber(old) } });
  const reply: Document = {};
  if (old !== undefined) reply.expireAfterSeconds_old = Long.fromNumber(old);
  reply.expireAfterSeconds_new = Long.fromNumber(secs);
  reply.ok = 1;
  return reply;
};

/**
 * collMod without an index modification: `changeStreamPreAndPostImages`, or nothing at all (mongod
 * still logs the collMod, so a stream with showExpandedEvents sees a `modify` event: change streams
 * spec test change-streams-showExpandedEvents.json "modify events are reported"). Reply `{ ok: 1 }`.
 */
function collModOptions(ctx: CommandCtx, name: string): Document {
  const coll = ctx.state.storage.getCollection(ctx.db, name);
  if (!coll) throw new MongoCommandError(Codes.NamespaceNotFound, 'ns does not exist');
  const prePost = preAndPostImagesOption(ctx, 'collMod');
  ctx.state.storage.modifyCollection(coll, { options: withPrePost(coll.options, prePost), description: collModDescription(ctx) });
  return { ok: 1 };
}

/** The collection options after a collMod's changeStreamPreAndPostImages (undefined: unchanged). */
function withPrePost(options: Document, enabled: boolean | undefined): Document | undefined {
  if (enabled === undefined) return undefined;
  const next: Document = { ...options };
  if (enabled) next.changeStreamPreAndPostImages = { enabled: true };
  else delete next.changeStreamPreAndPostImages;
  return next;
}

/** The collMod oplog entry's `o` without `collMod` and the generic arguments (parseCollModRequest). */
function collModDescription(ctx: CommandCtx, index?: Document): Document {
  const out: Document = {};
  for (const [k, v] of Object.entries(ctx.cmd)) {
    if (k === 'collMod' || COLLMOD_GENERIC.has(k)) continue;
    out[k] = k === 'index' && index ? index : v;
  }
  return out;
}

/**
 * renameCollection (admin command; manual "renameCollection"), same-database renames:
 * RenameCollectionCommand::typedRun (src/mongo/db/commands/rename_collection_cmd.cpp) and
 * validateNamespacesForRenameCollection / checkSourceAndTargetNamespaces / renameCollectionWithinDB
 * (src/mongo/db/catalog/rename_collection.cpp). The collection keeps its documents, indexes and UUID;
 * with `dropTarget` an existing target is dropped as part of the rename (one oplog entry, one
 * `rename` change event carrying `operationDescription.dropTarget`, the dropped collection's UUID).
 * Refused (NotImplemented): renames across databases (mongod copies into a temporary collection,
 * with change events of its own), system collections, `dropTarget` given as a UUID, `stayTemp`,
 * `collectionUUID`, and collections a running transaction has written.
 */
const RENAME_OPTIONS = new Set(['renameCollection', 'to', 'dropTarget', ...COLLMOD_GENERIC]);

function splitNamespace(ns: unknown, which: string): [string, string] {
  if (typeof ns !== 'string') throw unsupported(`renameCollection with a non-string ${which} namespace`);
  const dot = ns.indexOf('.');
  if (dot <= 0 || dot === ns.length - 1) throw unsupported(`renameCollection with the ${which} namespace '${ns}' (mongod's parse error is not sourced here)`);
  return [ns.slice(0, dot), ns.slice(dot + 1)];
}

const renameCollection: Handler = (ctx) => {
  noTxn(ctx);
  // Command::adminOnly, checked when the command is dispatched (service_entry_point_common.cpp).
  if (ctx.db !== 'admin') throw new MongoCommandError(Codes.Unauthorized, 'renameCollection may only be run against the admin database.');
  for (const k of Object.keys(ctx.cmd)) if (!RENAME_OPTIONS.has(k)) throw unsupported(`the renameCollection option '${k}'`);
  const dropTargetOpt = ctx.cmd.dropTarget;
  if (dropTargetOpt !== undefined && typeof dropTargetOpt !== 'boolean') throw unsupported('renameCollection with dropTarget other than a boolean');
  const [fromDb, fromName] = splitNamespace(ctx.cmd.renameCollection, 'source');
  const [toDb, toName] = splitNamespace(ctx.cmd.to, 'target');
  const source = `${fromDb}.${fromName}`;
  const target = `${toDb}.${toName}`;
  if (source === target) throw new MongoCommandError(Codes.IllegalOperation, "Can't rename a collection to itself");
  if (fromDb !== toDb) throw unsupported('renameCollection across databases');
  if (fromName.startsWith('system.') || toName.startsWith('system.')) throw unsupported('renameCollection of or to a system collection');
  validateNamespace(toDb, toName);
  const storage = ctx.state.storage;
  if (!storage.databaseNames().includes(fromDb)) throw new MongoCommandError(Codes.NamespaceNotFound, `Database ${fromDb} does not exist or is drop pending`);
  const coll = storage.getCollection(fromDb, fromName);
  // checkSourceAndTargetNamespaces (rename_collection.cpp): a view is neither source nor target.
  if (!coll && storage.getView(fromDb, fromName)) throw new MongoCommandError(Codes.CommandNotSupportedOnView, `cannot rename view: ${source}`);
  if (!coll) throw new MongoCommandError(Codes.NamespaceNotFound, `Source collection ${source} does not exist`);
  const existing = storage.getCollection(toDb, toName);
  if (!existing && storage.getView(toDb, toName)) throw new MongoCommandError(Codes.NamespaceExists, `a view already exists with that name: ${target}`);
  if (existing && !dropTargetOpt) throw new MongoCommandError(Codes.NamespaceExists, 'target namespace exists');
  for (const c of [coll, existing]) {
    if (c && [...storage.locks.keys()].some((k) => k.startsWith(`${c.ns}\0`))) throw unsupported('renameCollection of a collection a running transaction has written (mongod waits for its locks)');
  }
  storage.renameCollection(coll, toName, existing);
  return { ok: 1 };
};

/**
 * collMod of a view's viewOn/pipeline (ViewCatalog::modifyView: an option left out keeps its value)
 * or of a collection's validator, validationLevel and validationAction (coll_mod.cpp; each option
 * replaces the stored one). Mixing them, or view options on a collection and validation options on
 * a view, is refused loudly (mongod's messages are not sourced here). Reply `{ok: 1}`.
 */
function collModViewOrValidation(ctx: CommandCtx, name: string): Document {
  const storage = ctx.state.storage;
  const view = storage.getView(ctx.db, name);
  const coll = storage.getCollection(ctx.db, name);
  if (!view && !coll) throw new MongoCommandError(Codes.NamespaceNotFound, 'ns does not exist');
  const viewOptions = VIEW_OPTIONS.filter((k) => ctx.cmd[k] !== undefined);
  const validationOptions = VALIDATION_OPTIONS.filter((k) => ctx.cmd[k] !== undefined);
  if (view) {
    if (validationOptions.length) throw unsupported(`collMod '${validationOptions[0]}' on a view`);
    if (ctx.cmd.changeStreamPreAndPostImages !== undefined) throw unsupported('collMod changeStreamPreAndPostImages on a view (mongod refuses it with InvalidOptions)');
    const def = parseViewDefinition('collMod', ctx.cmd.viewOn ?? view.viewOn, ctx.cmd.pipeline ?? view.pipeline);
    modifyView(storage, ctx.db, name, def);
    return { ok: 1 };
  }
  if (viewOptions.length) throw unsupported(`collMod '${viewOptions[0]}' on a collection`);
  const changes = checkValidationOptions(ctx.cmd, 'collMod');
  const options = { ...coll!.options, ...changes };
  storage.modifyCollection(coll!, { options: withPrePost(options, preAndPostImagesOption(ctx, 'collMod')) ?? options, description: collModDescription(ctx) });
  return { ok: 1 };
}

/** Commands mongod has that the emulator does not implement: NotImplemented, not CommandNotFound. */
const notImplemented = (what: string): Handler => () => {
  throw unsupported(what);
};

export const adminCommands: Record<string, Handler> = {
  collMod,
  renameCollection,
  bulkWrite: notImplemented('the bulkWrite command (client-level bulk write, 8.0+)'),
  mapReduce: notImplemented('the mapReduce command'),
  compact: notImplemented('the compact command'),
  validate: notImplemented('the validate command'),
  create,
  drop,
  dropDatabase,
  listCollections,
  listDatabases,
  createIndexes,
  listIndexes,
  dropIndexes,
};
