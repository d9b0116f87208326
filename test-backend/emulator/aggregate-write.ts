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
 * `bypassDocumentValidation` is accepted and passed along in the write options (the emulator has no
 * validators here). What is not sourced is refused with NotImplemented (see `unsupported` calls).
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
import { insertOne, prepareInsert, updateStatement, waitingForLocks, type ExecCtx, type UpdateSpec } from './writes';
import { duplicateKeyError } from './indexes';

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

/** The pipeline without its write stage, and the parsed stage. */
export interface ParsedWrite {
  body: Document[];
  stage: WriteStage;
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
  return { body: pipeline.slice(0, at), stage };
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
  // bypassDocumentValidation travels with the writes (document_source_writer.h: the writer's
  // bypassDocumentValidation comes from the command); there are no validators to bypass yet.
  const bypassDocumentValidation = ctx.cmd.bypassDocumentValidation === true;
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

async function runOut(ctx: CommandCtx, stage: OutStage, docs: Document[], _opts: WriteOptions): Promise<void> {
  const { db, coll: name } = stage.target;
  refuseIfWatched(ctx, db);
  const storage = ctx.state.storage;
  const existing = storage.getCollection(db, name);
  if (existing?.options.capped) throw new MongoCommandError(17152, `namespace '${db}.${name}' is capped so it can't be used for $out`);
  if (existing && (existing.options.viewOn !== undefined || existing.options.timeseries !== undefined)) throw unsupported('$out into a view or a time-series collection');
  // DocumentSourceOut::initialize: a temporary collection with the target's options and indexes.
  // It lives only in memory here: the documents are checked against it (ids, unique indexes) and it
  // becomes the target only when every one went in, so a failure leaves the target untouched.
  const temp = new Collection(db, `tmp.agg_out.${new UUID().toHexString(true)}`, { ...(existing?.options ?? {}) });
  for (const spec of existing?.indexes.map((i) => i.spec) ?? []) temp.addIndex({ ...spec });
  const prepared: Array<[string, Document]> = [];
  for (const raw of docs) {
    const doc = prepareInsert(raw);
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
    if (storage.getCollection(db, name)) storage.dropCollection(db, name);
    const target = storage.ensureCollection(db, name, temp.options);
    for (const idx of temp.indexes) storage.createIndex(target, { ...idx.spec });
    for (const [key, doc] of prepared) storage.commit({ coll: target, key, before: null, after: doc, kind: 'insert' });
  });
}

/** MergeStrategy of each mode pair (document_source_merge.cpp, getDescriptors). */
async function runMerge(ctx: CommandCtx, stage: MergeStage, docs: Document[], _opts: WriteOptions): Promise<void> {
  const { db, coll: name } = stage.target;
  const strict = stage.whenNotMatched === 'fail';
  if (strict) checkOneBatch(docs);
  let unmatched = 0;
  for (const source of docs) {
    let doc = source;
    // makeBatchObject: an `_id` is generated when the `on` fields include it and it is missing.
    if (stage.on.includes('_id') && doc._id === undefined) doc = { ...doc, _id: new ObjectId() };
    const q = onFieldsOf(doc, stage.on);
    for (const k of Object.keys(doc)) {
      if (k.startsWith('$') || k.includes('.')) throw unsupported(`$merge of a document with the field name '${k}'`);
    }
    try {
      const matched = await waitingForLocks(() => mergeOne(ctx, stage, db, name, q, doc));
      if (!matched) unmatched++;
    } catch (e) {
      throw withMergeContext(e, stage);
    }
  }
  // makeStrictUpdateStrategy: the whole batch is applied, then nMatched is checked.
  if (strict && unmatched > 0) {
    throw new MongoCommandError(13113, '$merge could not find a matching document in the target collection for at least one document in the source collection', {}, 'MergeStageNoMatchingDocument');
  }
}

/**
 * mongod writes $merge's output in batches (BSONObjMaxUserSize, maxWriteBatchSize 100000); with
 * whenNotMatched: fail the check runs per batch, so an output that may span several batches is
 * refused rather than checked as one.
 */
function checkOneBatch(docs: Document[]): void {
  if (docs.length >= 100000) throw unsupported('$merge whenNotMatched: fail over more than one write batch');
  let size = 0;
  for (const d of docs) size += calculateObjectSize(d) * 2;
  if (size > 8 * 1024 * 1024) throw unsupported('$merge whenNotMatched: fail over more than one write batch');
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

/** One document's write; returns whether a target document matched. */
function mergeOne(ctx: CommandCtx, stage: MergeStage, db: string, name: string, q: Document, doc: Document): boolean {
  const exec = ctx.exec;
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
      // The `let` variables are evaluated against the source document; `new` is the document.
      const letSpec = stage.let ?? { new: '$$ROOT' };
      const vars: Document = {};
      try {
        for (const [n, expr] of Object.entries(letSpec)) vars[n] = evaluate(doc, bindExpression(expr, ctx.vars));
      } catch (e) {
        throw toCommandError(e);
      }
      if (stage.whenNotMatched === 'insert' && !('new' in letSpec)) vars.new = doc;
      const pipelineExec: ExecCtx = { ...exec, vars: { ...exec.vars, let: vars } };
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
