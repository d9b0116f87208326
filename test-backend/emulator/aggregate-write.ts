/**
 * The aggregation write stages `$out` and `$merge` (MongoDB 7.0, maxWireVersion 21).
 *
 * `parseWriteStage` finds a write stage, validates it as mongod does before running anything, and
 * splits it off the pipeline; crud.ts runs the rest of the pipeline and hands the documents to
 * `runWriteStage`, which writes them and answers with an empty cursor (`firstBatch: []`, id 0).
 *
 * Sources (read with read_file on mongodb/mongo and forks holding the 5.0-era files):
 *  - `$out`: src/mongo/db/pipeline/document_source_out.{h,cpp} (LiteParsed::parse,
 *    parseNsFromElem, create, initialize, finalize): 16990 "$out only supports a string or object
 *    argument, but found <type>"; InvalidNamespace "Invalid $out target namespace, <ns>";
 *    OperationNotSupportedInTransaction "$out cannot be used in a transaction"; 17385 "Can't $out to
 *    special collection: <coll>"; 31321 "Can't $out to internal database: <db>"; InvalidOptions
 *    "$out cannot be used with a 'linearizable' read concern level" (LiteParsed::supportsReadConcern).
 *    The documents go to a temporary collection `<db>.tmp.agg_out.<UUID>` created with the target's
 *    options and indexes, which then replaces the target (renameCollection with dropTarget): a
 *    failure leaves the target untouched, and a DuplicateKey names the temporary namespace.
 *  - `$merge`: src/mongo/db/pipeline/document_source_merge.{h,cpp} (LiteParsed::parse, create,
 *    createFromBson, the merge-strategy descriptors, extractMergeOnFieldsFromDoc, spill/flush):
 *    51181 unsupported mode pair; InvalidNamespace "Invalid $merge target namespace: '<ns>'"; 263
 *    "$merge cannot be used in a transaction"; 31319 "Cannot $merge to special collection: <coll>";
 *    31320 "Cannot $merge to internal database: <db>"; 51273 / 51199 (`let`); 31465 duplicate `on`
 *    field; 51185 / 51132 `on` field an array / nullish; 13113 MergeStageNoMatchingDocument;
 *    ImmutableField and DuplicateKey re-thrown with context ("<context> :: caused by :: <errmsg>",
 *    Status::withContext), the DuplicateKey contexts as jstests/aggregation/sources/merge/
 *    mode_fail_insert.js asserts them. `on` fields other than `_id` need a unique, non-partial index
 *    on exactly those fields, else 51183 "Cannot find index to verify that join fields will be
 *    unique" (ensureFieldsUniqueOrResolveDocumentKey, fieldsHaveSupportingUniqueIndex,
 *    keyPatternNamesExactPaths in the mongod process interface); a missing target only admits `_id`.
 *  - Position: Pipeline::validateCommon (src/mongo/db/pipeline/pipeline.cpp): 40601 "<stage> can
 *    only be the final stage in the pipeline".
 *
 *  - Views: a view target fails with CommandNotSupportedOnView (166) "Namespace <ns> is a view, not
 *    a collection" (jstests/core/views/views_aggregation.js testAggStagesWritingToViews): `$out`'s
 *    initialize reads the target's options through the process interface's
 *    getCollectionOptionsLocally (AutoGetCollectionForReadCommand, views forbidden, db_raii.cpp)
 *    before it reads any input; `$merge`'s first batch write (performInserts/performUpdates,
 *    write_ops_exec.cpp, AutoGetCollection views forbidden) fails and nothing is created.
 *  - Document validation: `$out`'s temporary collection is created with the target's options
 *    (validator, validationLevel, validationAction), so its inserts are validated (validation.ts,
 *    DocumentValidationFailure 121 with errInfo) unless `bypassDocumentValidation`; `$merge`'s writes
 *    carry the flag (buildInsertOp/buildUpdateOp `setBypassDocumentValidation`): jstests
 *    core/doc_validation/bypass_doc_validation.js ("aggregation command with a $out stage") and
 *    aggregation/sources/merge/bypass_doc_validation.js. The flag is a `safeBool`
 *    (aggregate_command.idl, basic_types.idl: bool or number, BSONElement::trueValue; another type is
 *    TypeMismatch: safe-bool.ts).
 *  - Batches: DocumentSourceWriter::doGetNext (document_source_writer.h) builds every document's
 *    batch entry (makeBatchObject: `on` values, `let` variables) before a batch is flushed, and the
 *    batch write is unordered (buildInsertOp/buildUpdateOp `setOrdered(false)`; the process
 *    interface's insert/update return the first statement error after all were tried). Batch
 *    boundaries (BSONObjMaxUserSize minus the write header, write_ops::kMaxWriteBatchSize 100,000)
 *    depend on mongod's size estimates, which are not modelled: an output that may not fit one batch
 *    is written statement by statement and refused if a statement fails.
 *
 * What is not sourced is refused with NotImplemented (see `unsupported` calls).
 */
import { calculateObjectSize, ObjectId, UUID, type Document } from 'bson';
import type { CommandCtx } from './context';
import { Codes, MongoCommandError, toCommandError, unsupported } from './errors';
import { evaluate } from './mingo-context';
import { checkLetName } from './let';
import { ensureColl, getColl } from './namespaces';
import { bindExpression } from './query';
import { Collection } from './storage/collection';
import { WaitForLock } from './storage/engine';
import { bsonTypeName } from './update-rules';
import { isPlainObject, keyOf } from './values';
import { insertOne, MAX_USER_DOC_SIZE, prepareInsert, updateStatement, waitingForLocks, type ExecCtx, type UpdateSpec } from './writes';
import { duplicateKeyError } from './indexes';
import { parseSafeBool } from './safe-bool';
import { validateWrite } from './validation';
import { viewNotCollection } from './views';
import { MAX_WRITE_BATCH_SIZE } from './command-fields';

export type WhenMatched = 'replace' | 'keepExisting' | 'merge' | 'fail' | 'pipeline';
export type WhenNotMatched = 'insert' | 'discard' | 'fail';

interface Target {
  db: string;
  coll: string;
}

export interface OutStage {
  kind: '$out';
  target: Target;
}

export interface MergeStage {
  kind: '$merge';
  target: Target;
  on: string[];
  whenMatched: WhenMatched;
  whenNotMatched: WhenNotMatched;
  pipeline?: Document[];
  let?: Document;
}

export type WriteStage = OutStage | MergeStage;

/** The pipeline without its write stage, the parsed stage, and the command's bypass flag. */
export interface ParsedWrite {
  body: Document[];
  stage: WriteStage;
  bypassDocumentValidation: boolean;
}

/** NamespaceString::isOnInternalDb: admin, local and config. */
const INTERNAL_DBS = new Set(['admin', 'local', 'config']);

/** The mode pairs of the merge-strategy descriptor map (document_source_merge.cpp, getDescriptors). */
const SUPPORTED_MODES = new Set([
  'replace/insert', 'replace/fail', 'replace/discard',
  'merge/insert', 'merge/fail', 'merge/discard',
  'keepExisting/insert', 'fail/insert',
  'pipeline/insert', 'pipeline/fail', 'pipeline/discard',
]);

/** The stages an update pipeline admits (the same list writes.ts enforces for pipeline updates). */
const UPDATE_PIPELINE_STAGES = new Set(['$addFields', '$set', '$project', '$unset', '$replaceRoot', '$replaceWith']);

const MERGE_FIELDS = new Set(['into', 'on', 'let', 'whenMatched', 'whenNotMatched']);

/**
 * Finds `$out` / `$merge` in the pipeline and validates it in mongod's order: the stage's own parse
 * (lite parse), the read concern, the stage's creation checks, then its position. Returns undefined
 * when the pipeline has no write stage.
 */
export function parseWriteStage(ctx: CommandCtx, pipeline: Document[]): ParsedWrite | undefined {
  const at = pipeline.findIndex((s) => isPlainObject(s) && ('$out' in s || '$merge' in s));
  if (at < 0) return undefined;
  const raw = pipeline[at];
  const name = Object.keys(raw)[0] as '$out' | '$merge';
  const spec = raw[name] as unknown;
  const stage = name === '$out' ? liteParseOut(ctx.db, spec) : liteParseMerge(ctx.db, spec);
  // supportsReadConcern of both LiteParsed classes.
  const rc = ctx.cmd.readConcern as Document | undefined;
  if (rc?.level === 'linearizable') throw new MongoCommandError(Codes.InvalidOptions, `${name} cannot be used with a 'linearizable' read concern level`);
  if (stage.kind === '$out') createOut(ctx, stage);
  else createMerge(ctx, stage, spec as Document | string);
  if (at !== pipeline.length - 1) throw new MongoCommandError(40601, `${name} can only be the final stage in the pipeline`);
  checkWriteConcern(ctx);
  return { body: pipeline.slice(0, at), stage, bypassDocumentValidation: parseSafeBool('aggregate', 'bypassDocumentValidation', ctx.cmd.bypassDocumentValidation) };
}

/**
 * The aggregate's writeConcern applies to the stage's writes. The emulator answers w 0/1/majority
 * (one node); anything else is refused rather than ignored.
 */
function checkWriteConcern(ctx: CommandCtx): void {
  const wc = ctx.cmd.writeConcern as Document | undefined;
  if (!wc || wc.w === undefined) return;
  if (wc.w === 'majority' || wc.w === 1) return;
  throw unsupported(`aggregate writeConcern ${JSON.stringify(wc)} with $out/$merge`);
}

function validDbName(db: string): boolean {
  return db.length > 0 && db.length < 64 && !/[/\\. "$\0]/.test(db);
}

/** Collection names mongod would refuse at creation (code and wording not sourced): refused here. */
function refuseOddCollectionName(stage: string, coll: string): void {
  if (coll.includes('$') || coll.includes('\0') || coll.startsWith('.')) throw unsupported(`${stage} into the collection name '${coll}'`);
}

// ---- $out ------------------------------------------------------------------------------------

function liteParseOut(defaultDb: string, spec: unknown): OutStage {
  let target: Target;
  if (typeof spec === 'string') target = { db: defaultDb, coll: spec };
  else if (isPlainObject(spec)) {
    // 7.0 parses the object form with an IDL spec ({db, coll, timeseries}); its errors for other
    // shapes are not sourced, so only the exact {db: string, coll: string} form is accepted.
    const keys = Object.keys(spec);
    if (keys.length !== 2 || typeof spec.db !== 'string' || typeof spec.coll !== 'string') throw unsupported(`$out with the object ${JSON.stringify(spec)} (only {db: <string>, coll: <string>} is implemented)`);
    target = { db: spec.db, coll: spec.coll };
  } else {
    throw new MongoCommandError(16990, `$out only supports a string or object argument, but found ${bsonTypeName(spec)}`);
  }
  if (!validDbName(target.db) || target.coll === '') throw new MongoCommandError(Codes.InvalidNamespace, `Invalid $out target namespace, ${target.db}.${target.coll}`);
  refuseOddCollectionName('$out', target.coll);
  return { kind: '$out', target };
}

/** DocumentSourceOut::create. */
function createOut(ctx: CommandCtx, stage: OutStage): void {
  if (ctx.txn) throw new MongoCommandError(Codes.OperationNotSupportedInTransaction, '$out cannot be used in a transaction');
  const { db, coll } = stage.target;
  if (coll.startsWith('system.')) throw new MongoCommandError(17385, `Can't $out to special collection: ${coll}`);
  if (INTERNAL_DBS.has(db)) throw new MongoCommandError(31321, `Can't $out to internal database: ${db}`);
}

// ---- $merge ----------------------------------------------------------------------------------

function liteParseMerge(defaultDb: string, spec: unknown): MergeStage {
  if (typeof spec !== 'string' && !isPlainObject(spec)) {
    throw new MongoCommandError(Codes.TypeMismatch, `$merge requires a string or object argument, but found ${bsonTypeName(spec)}`);
  }
  let target: Target;
  let on: string[] = ['_id'];
  let whenMatched: WhenMatched = 'merge';
  let whenNotMatched: WhenNotMatched = 'insert';
  let pipeline: Document[] | undefined;
  let letSpec: Document | undefined;
  if (typeof spec === 'string') {
    target = { db: defaultDb, coll: spec };
  } else {
    // DocumentSourceMergeSpec (IDL): unknown fields 40415, a missing 'into' 40414.
    for (const k of Object.keys(spec)) {
      if (k === 'targetCollectionVersion') throw unsupported("$merge field 'targetCollectionVersion' (internal)");
      if (!MERGE_FIELDS.has(k)) throw new MongoCommandError(40415, `BSON field '$merge.${k}' is an unknown field.`);
    }
    if (spec.into === undefined) throw new MongoCommandError(40414, "BSON field '$merge.into' is missing but a required field");
    target = parseInto(defaultDb, spec.into);
    if (spec.on !== undefined) on = parseOn(spec.on);
    if (spec.whenMatched !== undefined) {
      if (Array.isArray(spec.whenMatched)) {
        whenMatched = 'pipeline';
        pipeline = spec.whenMatched as Document[];
      } else if (typeof spec.whenMatched === 'string' && ['replace', 'keepExisting', 'merge', 'fail'].includes(spec.whenMatched)) {
        whenMatched = spec.whenMatched as WhenMatched;
      } else {
        throw unsupported(`$merge whenMatched ${JSON.stringify(spec.whenMatched)} (mongod's error for it is not sourced)`);
      }
    }
    if (spec.whenNotMatched !== undefined) {
      if (typeof spec.whenNotMatched === 'string' && ['insert', 'discard', 'fail'].includes(spec.whenNotMatched)) whenNotMatched = spec.whenNotMatched as WhenNotMatched;
      else throw unsupported(`$merge whenNotMatched ${JSON.stringify(spec.whenNotMatched)} (mongod's error for it is not sourced)`);
    }
    if (spec.let !== undefined) {
      if (!isPlainObject(spec.let)) throw unsupported(`$merge let ${JSON.stringify(spec.let)} (mongod's error for it is not sourced)`);
      letSpec = spec.let;
    }
  }
  if (!validDbName(target.db) || target.coll === '') throw new MongoCommandError(Codes.InvalidNamespace, `Invalid $merge target namespace: '${target.db}.${target.coll}'`);
  refuseOddCollectionName('$merge', target.coll);
  if (!SUPPORTED_MODES.has(`${whenMatched}/${whenNotMatched}`)) {
    throw new MongoCommandError(51181, `Combination of $merge modes 'whenMatched: ${whenMatched}' and 'whenNotMatched: ${whenNotMatched}' is not supported`);
  }
  return { kind: '$merge', target, on, whenMatched, whenNotMatched, pipeline, let: letSpec };
}

function parseInto(defaultDb: string, into: unknown): Target {
  if (typeof into === 'string') return { db: defaultDb, coll: into };
  if (isPlainObject(into) && typeof into.coll === 'string' && Object.keys(into).every((k) => k === 'db' || k === 'coll') && (into.db === undefined || typeof into.db === 'string')) {
    return { db: (into.db as string | undefined) || defaultDb, coll: into.coll };
  }
  throw unsupported(`$merge into ${JSON.stringify(into)} (mongod's error for it is not sourced)`);
}

function parseOn(on: unknown): string[] {
  const fields = typeof on === 'string' ? [on] : on;
  if (!Array.isArray(fields) || fields.length === 0 || !fields.every((f) => typeof f === 'string' && f.length > 0 && !f.startsWith('$') && !f.split('.').includes(''))) {
    throw unsupported(`$merge on ${JSON.stringify(on)} (mongod's error for it is not sourced)`);
  }
  // convertToFieldPaths.
  const seen = new Set<string>();
  for (const f of fields as string[]) {
    if (seen.has(f)) throw new MongoCommandError(31465, `Found a duplicate field '${f}'`);
    seen.add(f);
  }
  return fields as string[];
}

/** DocumentSourceMerge::createFromBson then DocumentSourceMerge::create. */
function createMerge(ctx: CommandCtx, stage: MergeStage, spec: Document | string): void {
  const { db, coll } = stage.target;
  if (typeof spec !== 'string' && spec.on !== undefined && !hasSupportingUniqueIndex(ctx, stage)) {
    throw new MongoCommandError(51183, 'Cannot find index to verify that join fields will be unique');
  }
  if (ctx.txn) throw new MongoCommandError(Codes.OperationNotSupportedInTransaction, '$merge cannot be used in a transaction');
  if (coll.startsWith('system.')) throw new MongoCommandError(31319, `Cannot $merge to special collection: ${coll}`);
  if (INTERNAL_DBS.has(db)) throw new MongoCommandError(31320, `Cannot $merge to internal database: ${db}`);
  if (stage.whenMatched === 'pipeline') {
    const letSpec = stage.let ?? { new: '$$ROOT' };
    if ('new' in letSpec && letSpec.new !== '$$ROOT') throw new MongoCommandError(51273, "'let' may not define a value for the reserved 'new' variable other than '$$ROOT'");
    for (const n of Object.keys(letSpec)) checkLetName(n);
    // The whenMatched pipeline is an update pipeline: other stages are refused by mongod when it
    // parses the update, with an error not sourced for $merge.
    for (const s of stage.pipeline ?? []) {
      const op = isPlainObject(s) && Object.keys(s).length === 1 ? Object.keys(s)[0] : undefined;
      if (!op || !UPDATE_PIPELINE_STAGES.has(op)) throw unsupported(`$merge whenMatched pipeline stage ${JSON.stringify(s)}`);
    }
    // Whether the aggregate's own `let` variables reach the whenMatched pipeline is not sourced.
    if (ctx.cmd.let !== undefined) throw unsupported("aggregate 'let' together with a $merge whenMatched pipeline");
  } else if (stage.let !== undefined) {
    throw new MongoCommandError(51199, `Cannot use 'let' variables with 'whenMatched: ${stage.whenMatched}' mode`);
  }
}

/**
 * fieldsHaveSupportingUniqueIndex / supportsUniqueKey: a missing collection admits only `_id`;
 * otherwise some index is unique (the `_id` index is), not partial, and its key pattern names
 * exactly the `on` fields with numeric values.
 */
function hasSupportingUniqueIndex(ctx: CommandCtx, stage: MergeStage): boolean {
  const coll = getColl(ctx.exec, stage.target.db, stage.target.coll);
  const want = new Set(stage.on);
  if (!coll) return want.size === 1 && want.has('_id');
  return coll.allSpecs().some((spec) => {
    if (spec.name !== '_id_' && !spec.unique) return false;
    if (spec.partialFilterExpression !== undefined) return false;
    if (spec.collation !== undefined) throw unsupported('$merge on fields whose unique index has a collation');
    const keys = Object.keys(spec.key);
    return keys.length === want.size && keys.every((k) => want.has(k) && typeof (spec.key as Document)[k] === 'number');
  });
}

// ---- execution -------------------------------------------------------------------------------

/** Writes the pipeline's output `docs` and returns the aggregate's reply (an empty, closed cursor). */
export async function runWriteStage(ctx: CommandCtx, parsed: ParsedWrite, docs: Document[], sourceNs: string): Promise<Document> {
  // bypassDocumentValidation travels with the writes (the process interface's buildInsertOp /
  // buildUpdateOp: setBypassDocumentValidation(expCtx->bypassDocumentValidation)).
  const { bypassDocumentValidation } = parsed;
  if (parsed.stage.kind === '$out') await runOut(ctx, parsed.stage, docs, { bypassDocumentValidation });
  else await runMerge(ctx, parsed.stage, docs, { bypassDocumentValidation });
  return ctx.state.cursors.fromArray(sourceNs, [], 0);
}

export interface WriteOptions {
  bypassDocumentValidation: boolean;
}

/**
 * Which change-stream events mongod reports for $out's temporary collection and its
 * renameCollection over the target was not sourced: an $out into a database a change stream
 * watches (or with a cluster-wide stream open) is refused.
 */
function refuseIfWatched(ctx: CommandCtx, db: string): void {
  for (const ns of ctx.state.cursors.streamNamespaces()) {
    const streamDb = ns.slice(0, ns.indexOf('.'));
    if (streamDb === db || ns === 'admin.$cmd.aggregate') throw unsupported(`$out into database '${db}' while a change stream watches it (the temporary collection's and the rename's events are not sourced)`);
  }
}

async function runOut(ctx: CommandCtx, stage: OutStage, docs: Document[], opts: WriteOptions): Promise<void> {
  const { db, coll: name } = stage.target;
  refuseIfWatched(ctx, db);
  const storage = ctx.state.storage;
  // initialize(): getCollectionOptions reads the target through AutoGetCollectionForReadCommand,
  // which refuses a view (views forbidden) before any input is read.
  if (storage.getView(db, name)) throw viewNotCollection(db, name);
  const existing = storage.getCollection(db, name);
  if (existing?.options.capped) throw new MongoCommandError(17152, `namespace '${db}.${name}' is capped so it can't be used for $out`);
  if (existing?.options.timeseries !== undefined) throw unsupported('$out into a time-series collection');
  // DocumentSourceOut::initialize: a temporary collection with the target's options and indexes.
  // It lives only in memory here: the documents are checked against it (validator, ids, unique
  // indexes) and it becomes the target only when every one went in, so a failure leaves the target
  // untouched. Its inserts are unordered, but the first failing statement is the same as in an
  // ordered run (every earlier one went in), and a failure drops the temporary collection.
  const temp = new Collection(db, `tmp.agg_out.${new UUID().toHexString(true)}`, { ...(existing?.options ?? {}) });
  for (const spec of existing?.indexes.map((i) => i.spec) ?? []) temp.addIndex({ ...spec });
  // The temporary collection carries the target's validator, validationLevel and validationAction
  // (validation.ts: an insert is checked at every level but off; warn lets it through).
  const validate = temp.options.validator !== undefined && !opts.bypassDocumentValidation;
  const prepared: Array<[string, Document]> = [];
  for (const raw of docs) {
    const doc = prepareInsert(raw);
    if (validate) validateWrite(temp, null, doc);
    const key = keyOf(doc._id);
    if (temp.docs.has(key)) throw duplicateKeyError(temp.ns, '_id_', { _id: 1 }, { _id: doc._id });
    for (const idx of temp.indexes) {
      const entries = idx.entries(doc);
      if (idx.spec.unique && idx.conflictOwner(entries, key) !== undefined) throw idx.duplicateKeyError(temp.ns, doc);
      idx.add(doc, key);
    }
    temp.docs.set(key, { doc, seq: 0 });
    prepared.push([key, doc]);
  }
  // renameCollection with dropTarget: waits for transactions writing to the target (they hold its
  // documents), then replaces it in one turn of the event loop (nothing interleaves).
  await waitingForLocks(() => {
    for (const [k, holder] of storage.locks) if (k.startsWith(`${db}.${name}\0`)) throw new WaitForLock(holder);
    // mongod logs inserts into the temporary collection and a renameCollection over the target; the
    // emulator's drop/create/insert events are not those, so a stream that reaches them (one opened
    // later from an earlier time included) refuses instead of reporting them.
    storage.eventsUnsupported(`the change events of $out into '${db}.${name}' (mongod logs its temporary collection's inserts and a rename)`, () => {
      if (storage.getCollection(db, name)) storage.dropCollection(db, name);
      const target = storage.ensureCollection(db, name, temp.options);
      for (const idx of temp.indexes) storage.createIndex(target, { ...idx.spec });
      for (const [key, doc] of prepared) storage.commit({ coll: target, key, before: null, after: doc, kind: 'insert' });
    });
  });
}

/**
 * Per-statement bytes added to an entry's q/u/c sizes: an upper bound of the statement fields
 * (upsert, multi, upsertSupplied...) mongod's write size estimators count.
 */
const STATEMENT_OVERHEAD = 1024;

/**
 * The bytes a batch surely holds: mongod's limit is BSONObjMaxUserSize minus the metadata, the
 * write header (namespace, write concern, the aggregate's `let` and runtime constants) and
 * internalQueryDocumentSourceWriterBatchExtraReservedBytes; half of BSONObjMaxUserSize minus the
 * `let` leaves room for all of them.
 */
function oneBatchCapacity(ctx: CommandCtx): number {
  const letSize = isPlainObject(ctx.cmd.let) ? calculateObjectSize(ctx.cmd.let) : 0;
  return MAX_USER_DOC_SIZE / 2 - letSize;
}

/** One entry of a $merge write batch (MergeProcessor::makeBatchObject). */
interface BatchObject {
  /** The `on` values, the statement's query. */
  q: Document;
  doc: Document;
  /** The resolved `let` variables (whenMatched pipeline only). */
  vars?: Document;
  /** An upper bound of mongod's estimate of the entry's size. */
  size: number;
}

/**
 * makeBatchObject: an `_id` is generated when the `on` fields include it and it is missing, the
 * `on` values are extracted (51132/51185), and the `let` variables are resolved against the
 * document (resolveLetVariablesIfNeeded).
 */
function makeBatchObject(ctx: CommandCtx, stage: MergeStage, source: Document): BatchObject {
  let doc = source;
  if (stage.on.includes('_id') && doc._id === undefined) doc = { ...doc, _id: new ObjectId() };
  const q = onFieldsOf(doc, stage.on);
  for (const k of Object.keys(doc)) {
    if (k.startsWith('$') || k.includes('.')) throw unsupported(`$merge of a document with the field name '${k}'`);
  }
  let vars: Document | undefined;
  if (stage.whenMatched === 'pipeline') {
    // The `let` variables are evaluated against the source document; `new` is the document.
    const letSpec = stage.let ?? { new: '$$ROOT' };
    vars = {};
    try {
      for (const [n, expr] of Object.entries(letSpec)) vars[n] = evaluate(doc, bindExpression(expr, ctx.vars));
    } catch (e) {
      throw toCommandError(e);
    }
    if (stage.whenNotMatched === 'insert' && !('new' in letSpec)) vars.new = doc;
  }
  const uSize = stage.whenMatched === 'pipeline' ? calculateObjectSize({ u: stage.pipeline ?? [] }) : calculateObjectSize(doc) + 32;
  const size = calculateObjectSize(q) + uSize + (vars ? calculateObjectSize(vars) : 0) + STATEMENT_OVERHEAD;
  return { q, doc, vars, size };
}

/**
 * MergeStrategy of each mode pair (document_source_merge.cpp, getDescriptors), run over the
 * batch as DocumentSourceWriter::doGetNext and the process interface do it: every entry is built
 * first (an error there writes nothing of the batch), then the batch is written unordered (every
 * statement tried, the first error thrown after), then whenNotMatched: fail checks nMatched.
 */
async function runMerge(ctx: CommandCtx, stage: MergeStage, docs: Document[], opts: WriteOptions): Promise<void> {
  const { db, coll: name } = stage.target;
  const exec: ExecCtx = { ...ctx.exec, bypassDocumentValidation: opts.bypassDocumentValidation };
  const capacity = oneBatchCapacity(ctx);
  const batch: BatchObject[] = [];
  let bytes = 0;
  // Whether the output surely fits the first batch (the boundaries are not modelled otherwise).
  let oneBatch = true;
  for (const source of docs) {
    let entry: BatchObject;
    try {
      entry = makeBatchObject(ctx, stage, source);
    } catch (e) {
      if (!oneBatch && !isRefusal(e)) throw unsupported('$merge: an error building a write batch entry after the first batch (mongod writes the earlier batches first; their boundaries are not modelled)');
      throw e;
    }
    bytes += entry.size;
    if (batch.length >= MAX_WRITE_BATCH_SIZE || bytes > capacity) oneBatch = false;
    batch.push(entry);
  }
  if (!batch.length) return;
  // The first batch write into a view fails (write_ops_exec.cpp: AutoGetCollection, views forbidden).
  if (ctx.state.storage.getView(db, name)) throw viewNotCollection(db, name);
  const strict = stage.whenNotMatched === 'fail';
  let firstError: MongoCommandError | undefined;
  let unmatched = 0;
  for (const entry of batch) {
    try {
      const matched = await waitingForLocks(() => mergeOne(exec, stage, db, name, entry));
      if (!matched) unmatched++;
    } catch (e) {
      if (!(e instanceof MongoCommandError) || isRefusal(e)) throw e;
      if (!oneBatch) throw unsupported('$merge: a write error in an output that may span more than one write batch (mongod stops after the failing batch; its boundaries are not modelled)');
      firstError ??= e;
    }
  }
  if (firstError) throw withMergeContext(firstError, stage);
  // makeStrictUpdateStrategy: the whole batch is applied, then nMatched is checked.
  if (strict && unmatched > 0) {
    if (!oneBatch) throw unsupported('$merge whenNotMatched: fail over more than one write batch');
    throw new MongoCommandError(13113, '$merge could not find a matching document in the target collection for at least one document in the source collection', {}, 'MergeStageNoMatchingDocument');
  }
}

function isRefusal(e: unknown): boolean {
  return e instanceof MongoCommandError && e.code === Codes.NotImplemented;
}

/** extractMergeOnFieldsFromDoc: the `on` values as an equality query. */
function onFieldsOf(doc: Document, on: string[]): Document {
  const q: Document = {};
  for (const f of on) {
    let v: unknown = doc;
    for (const p of f.split('.')) v = isPlainObject(v) ? v[p] : undefined;
    if (Array.isArray(v)) throw new MongoCommandError(51185, `$merge write error: 'on' field '${f}' is an array`);
    if (v === undefined || v === null) throw new MongoCommandError(51132, `$merge write error: 'on' field '${f}' cannot be missing, null, undefined or an array`);
    q[f] = v;
  }
  return q;
}

/** One statement of the batch; returns whether a target document matched. */
function mergeOne(exec: ExecCtx, stage: MergeStage, db: string, name: string, entry: BatchObject): boolean {
  const { q, doc } = entry;
  const upsert = stage.whenNotMatched === 'insert';
  switch (stage.whenMatched) {
    case 'fail':
      // makeInsertStrategy: a plain insert; a match is a DuplicateKey.
      insertOne(exec, ensureColl(exec, db, name), doc);
      return true;
    case 'replace':
      return update(exec, db, name, q, doc, upsert);
    case 'merge':
      return update(exec, db, name, q, { $set: doc }, upsert);
    case 'keepExisting':
      return update(exec, db, name, q, { $setOnInsert: doc }, upsert);
    case 'pipeline': {
      const pipelineExec: ExecCtx = { ...exec, vars: { ...exec.vars, let: entry.vars ?? {} } };
      const matched = update(pipelineExec, db, name, q, stage.pipeline ?? [], false);
      // UpsertType::kInsertSuppliedDoc: without a match the source document itself is inserted.
      if (!matched && upsert) insertOne(exec, ensureColl(exec, db, name), doc);
      return matched;
    }
  }
}

function update(exec: ExecCtx, db: string, name: string, q: Document, u: UpdateSpec, upsert: boolean): boolean {
  const r = updateStatement(exec, db, name, { q, u, upsert, multi: false });
  return r.upsertedId === undefined && r.n > 0;
}

/** DocumentSourceMerge::flush's catch blocks. */
function withMergeContext(e: unknown, stage: MergeStage): unknown {
  if (!(e instanceof MongoCommandError)) return e;
  let context: string | undefined;
  if (e.code === Codes.ImmutableField) context = '$merge failed to update the matching document, did you attempt to modify the _id or the shard key?';
  if (e.code === Codes.DuplicateKey) {
    const pattern = Object.keys((e.extra.keyPattern as Document | undefined) ?? {});
    const onOn = pattern.length === stage.on.length && stage.on.every((f) => pattern.includes(f));
    context = stage.whenMatched === 'fail' && stage.whenNotMatched === 'insert' && onOn
      ? "$merge with whenMatched: fail found an existing document with the same values for the 'on' fields"
      : '$merge failed due to a DuplicateKey error';
  }
  if (!context) return e;
  return new MongoCommandError(e.code, `${context} :: caused by :: ${e.message}`, e.extra, e.codeName);
}
