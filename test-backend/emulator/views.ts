/**
 * Read-only views (`create` with `viewOn` + `pipeline`): the view catalog's rules, the resolved
 * pipeline reads go through, and the answers mongod gives to commands a view does not support.
 *
 * Sources (mongodb/mongo):
 *  - create: src/mongo/db/commands/create_command.cpp (CmdCreate::typedRun: "'pipeline' requires
 *    'viewOn' to also be specified"; NamespaceExists turned into success when the existing view
 *    has the same viewOn and pipeline, else checkCollectionOptions' messages);
 *    src/mongo/db/catalog/create_collection.cpp (createCollection: "Cannot create a view in a
 *    multi-document transaction.");
 *  - the catalog: src/mongo/db/views/view_catalog.cpp (createView, modifyView: "cannot modify
 *    missing view <ns>", resolveView: the view pipelines prepended, innermost first) and
 *    src/mongo/db/views/view_graph.cpp (ViewGraph::_validateChildren: GraphContainsCycle "View
 *    cycle detected: ..."); the pipeline is validated with the stages refusing views
 *    ($out/$merge, $changeStream, collection-independent stages) — here every stage outside a
 *    small allowlist is refused with NotImplemented instead;
 *  - reads: a find, count or distinct on a view runs as an aggregation of the resolved pipeline
 *    (query_request_helper::asAggregationCommand, count_cmd.cpp, distinct.cpp); jstests
 *    core/views/views_find.js, views_count.js, views_distinct.js, views_aggregation.js;
 *  - refusals: jstests/core/views/views_all_commands.js (insert, update, delete, findAndModify,
 *    createIndexes, listIndexes, dropIndexes fail with CommandNotSupportedOnView 166); the
 *    message "Namespace <ns> is a view, not a collection" is AutoGetCollection's (db_raii.cpp,
 *    kViewsForbidden), used by the write path (write_ops_exec.cpp: insertBatchAndHandleErrors,
 *    writeConflictRetryUpsert/Remove: one write error per statement), createIndexes
 *    (runCreateIndexesWithCoordinator's AutoGetCollection), listIndexes and change streams
 *    (run_aggregate.cpp: "Raise an error if 'origNss' is a view"); dropIndexes answers "Cannot
 *    drop indexes on view <ns>" (drop_indexes.cpp, checkView);
 *  - listCollections: list_collections.cpp buildViewBson ({name, type: 'view', options: {viewOn,
 *    pipeline}, info: {readOnly: true}}), views after collections, and the database's
 *    `system.views` collection listed among the collections;
 *  - drop: drop_collection.cpp _dropView (reply {ns, ok}).
 *
 * Refused (NotImplemented): views with a collation, view pipelines reading other namespaces
 * ($lookup, $graphLookup, $unionWith, $facet), hints on a view, projections other than plain
 * inclusion/exclusion on a find over a view, explain on a view, reading `system.views`.
 */
import { UUID, type Document } from 'bson';
import { makeAggregator } from './mingo-context';
import { Codes, MongoCommandError, toCommandError, unsupported } from './errors';
import { bindPipeline, type SystemVars } from './query';
import type { Collection } from './storage/collection';
import type { Storage, ViewDef } from './storage/engine';
import { formatValue, isPlainObject, keyOf } from './values';

export const COMMAND_NOT_SUPPORTED_ON_VIEW = 166;

/** AutoGetCollection's refusal (kViewsForbidden). */
export function viewNotCollection(db: string, name: string): MongoCommandError {
  return new MongoCommandError(COMMAND_NOT_SUPPORTED_ON_VIEW, `Namespace ${db}.${name} is a view, not a collection`, {}, 'CommandNotSupportedOnView');
}

/** drop_indexes.cpp checkView. */
export function cannotDropIndexesOnView(db: string, name: string): MongoCommandError {
  return new MongoCommandError(COMMAND_NOT_SUPPORTED_ON_VIEW, `Cannot drop indexes on view ${db}.${name}`, {}, 'CommandNotSupportedOnView');
}

/**
 * The stages a view pipeline may hold here: the ones mingo runs that read only their input. Others
 * mongod accepts (or refuses with its own messages) are refused loudly.
 */
const VIEW_STAGES = new Set(['$match', '$project', '$addFields', '$set', '$unset', '$sort', '$limit', '$skip', '$group', '$unwind', '$replaceRoot', '$replaceWith', '$count', '$sortByCount', '$bucket', '$bucketAuto', '$redact']);

/** Reading `db.system.views` would show the definitions; the emulator keeps them elsewhere. */
export function rejectSystemViews(name: string): void {
  if (name === 'system.views') throw unsupported("reading the 'system.views' collection");
}

/** The options `create` and `collMod` accept for a view, checked before anything changes. */
export function parseViewDefinition(cmdName: string, viewOn: unknown, pipeline: unknown): { viewOn: string; pipeline: Document[] } {
  if (typeof viewOn !== 'string') throw unsupported(`${cmdName} with a non-string 'viewOn' (mongod's IDL message is not sourced here)`);
  if (!viewOn) throw unsupported(`${cmdName} with an empty 'viewOn'`);
  if (viewOn.includes('$') || viewOn.startsWith('.') || viewOn.startsWith('system.')) throw unsupported(`${cmdName} with 'viewOn' ${JSON.stringify(viewOn)} (mongod's namespace checks are not sourced here)`);
  const stages = pipeline === undefined ? [] : pipeline;
  if (!Array.isArray(stages)) throw unsupported(`${cmdName} with a non-array 'pipeline'`);
  for (const stage of stages) {
    if (!isPlainObject(stage) || Object.keys(stage).length !== 1) throw unsupported(`${cmdName}: a view pipeline stage that is not a one-field document`);
    const op = Object.keys(stage)[0];
    if (!VIEW_STAGES.has(op)) throw unsupported(`the aggregation stage ${op} in a view pipeline`);
  }
  return { viewOn, pipeline: stages as Document[] };
}

/**
 * ViewGraph::insertAndValidate with `view` (re)defined: a walk from the view through the views it
 * reads; reaching the view again is GraphContainsCycle. The message is _validateChildren's: the
 * traversal printed from its end, which repeats the view first ("View cycle detected: db.a =>
 * db.a => db.b => db.a" for a on b on a). A view here reads only its viewOn, so the walk is a
 * chain. Depth beyond ViewGraph::kMaxViewDepth (20) is refused loudly.
 */
export function checkViewGraph(storage: Storage, view: ViewDef): void {
  const path = [view.name];
  let next = view.viewOn;
  for (let depth = 1; ; depth++) {
    path.push(next);
    if (next === view.name) {
      const shown = [...path].reverse().map((n) => `${view.db}.${n}`);
      throw new MongoCommandError(5, `View cycle detected: ${shown[0]} => ${shown.join(' => ')}`, {}, 'GraphContainsCycle');
    }
    const v = storage.getView(view.db, next);
    if (!v) return;
    if (depth >= 20) throw unsupported('a chain of more than 20 views (ViewDepthLimitExceeded; its message is not sourced here)');
    next = v.viewOn;
  }
}

/**
 * BSON printing of a UUID (BSONElement::toString for BinData subtype 4), used by
 * checkCollectionOptions' message through CollectionOptions::toBSON.
 */
function formatOptions(coll: Collection): string {
  const parts = [`uuid: UUID("${coll.uuid.toHexString(true)}")`];
  // CollectionOptions::appendBSON order: uuid, ..., validator, validationLevel, validationAction, ...
  for (const k of ['validator', 'validationLevel', 'validationAction']) if (coll.options[k] !== undefined) parts.push(`${k}: ${formatValue(coll.options[k])}`);
  return `{ ${parts.join(', ')} }`;
}

/**
 * `create` of a view. checkCollectionOptions (create_command.cpp) answers a NamespaceExists from
 * the catalog: success for the same view, else which option differs.
 */
export function createView(storage: Storage, db: string, name: string, def: { viewOn: string; pipeline: Document[] }, existingCollection: Collection | undefined): void {
  const ns = `${db}.${name}`;
  if (existingCollection) {
    throw new MongoCommandError(Codes.NamespaceExists, `namespace ${ns} already exists, but with different options: ${formatOptions(existingCollection)}`);
  }
  const existing = storage.getView(db, name);
  if (existing) {
    if (existing.viewOn !== def.viewOn) {
      throw new MongoCommandError(Codes.NamespaceExists, `namespace ${ns} already exists, but is a view on ${db}.${existing.viewOn} rather than ${db}.${def.viewOn}`);
    }
    if (keyOf(existing.pipeline) !== keyOf(def.pipeline)) {
      // pipelineAsBsonObj: the arrays printed as BSON objects ({ 0: ..., 1: ... }).
      throw new MongoCommandError(Codes.NamespaceExists, `namespace ${ns} already exists, but with pipeline ${asObject(existing.pipeline)} rather than ${asObject(def.pipeline)}`);
    }
    return;
  }
  const view: ViewDef = { db, name, viewOn: def.viewOn, pipeline: def.pipeline };
  checkViewGraph(storage, view);
  storage.putView(view);
  // The view's create event (OpObserverImpl::onCreateCollection; a view's catalog entry has no UUID).
  storage.recordViewCreated(db, name, { viewOn: def.viewOn, pipeline: def.pipeline });
}

function asObject(pipeline: Document[]): string {
  const o: Document = {};
  pipeline.forEach((s, i) => (o[String(i)] = s));
  return formatValue(o);
}

/** collMod of viewOn/pipeline (ViewCatalog::modifyView). */
export function modifyView(storage: Storage, db: string, name: string, def: { viewOn: string; pipeline: Document[] }): void {
  const view: ViewDef = { db, name, viewOn: def.viewOn, pipeline: def.pipeline };
  checkViewGraph(storage, view);
  storage.putView(view);
}

/** ViewCatalog::resolveView: the collection a view reads and the pipelines prepended innermost first. */
export function resolveView(storage: Storage, db: string, name: string): { coll: string; pipeline: Document[] } | undefined {
  let v = storage.getView(db, name);
  if (!v) return undefined;
  const pipeline: Document[] = [];
  for (let depth = 0; v; depth++) {
    if (depth > 20) throw unsupported('a chain of more than 20 views');
    pipeline.unshift(...v.pipeline);
    const on: string = v.viewOn;
    const next = storage.getView(db, on);
    if (!next) return { coll: on, pipeline };
    v = next;
  }
  return undefined;
}

/**
 * The documents of `stages` run over the view: the resolved view pipeline, then `stages`, on the
 * underlying collection's documents (`baseDocs`).
 */
export function runOnView(
  storage: Storage,
  db: string,
  name: string,
  stages: Document[],
  vars: SystemVars,
  baseDocs: (coll: string) => Document[],
  collectionResolver: (coll: string) => Document[],
): Document[] {
  const resolved = resolveView(storage, db, name);
  if (!resolved) throw new Error(`not a view: ${db}.${name}`);
  const pipeline = [...bindPipeline(resolved.pipeline, vars), ...stages];
  const docs = baseDocs(resolved.coll);
  if (!pipeline.length) return docs;
  try {
    return makeAggregator(pipeline, { variables: vars.let, collectionResolver }).run(docs) as Document[];
  } catch (e) {
    throw toCommandError(e);
  }
}

/** listCollections entries of the database's views (buildViewBson), plus `system.views`. */
export function viewInfos(storage: Storage, db: string, nameOnly: boolean): { systemViews: Document | undefined; views: Document[] } {
  const views = storage.views(db);
  if (!views.length) return { systemViews: undefined, views: [] };
  const entries = views.map((v) => (nameOnly ? { name: v.name, type: 'view' } : { name: v.name, type: 'view', options: { viewOn: v.viewOn, pipeline: v.pipeline }, info: { readOnly: true } }));
  const sys = systemViewsInfo(db, nameOnly);
  return { systemViews: sys, views: entries };
}

/** A stable UUID per database for the synthesized system.views entry. */
const systemViewsUuids = new Map<string, UUID>();

function systemViewsInfo(db: string, nameOnly: boolean): Document {
  if (nameOnly) return { name: 'system.views', type: 'collection' };
  let uuid = systemViewsUuids.get(db);
  if (!uuid) systemViewsUuids.set(db, (uuid = new UUID()));
  return { name: 'system.views', type: 'collection', options: {}, info: { readOnly: false, uuid }, idIndex: { v: 2, key: { _id: 1 }, name: '_id_' } };
}
