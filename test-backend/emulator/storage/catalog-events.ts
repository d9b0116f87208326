/**
 * The change events of catalog changes (create, createIndexes, dropIndexes, collMod, rename, a
 * view's create), shaped as mongod derives them from its oplog entries
 * (src/mongo/db/pipeline/change_stream_event_transform.cpp, ChangeStreamDefaultEventTransformation
 * and ChangeStreamViewDefinitionEventTransformation; the entries come from
 * src/mongo/db/op_observer/op_observer_impl.cpp). The clusterTime is added by the storage.
 */
import type { Document } from 'bson';
import type { ChangeEvent } from '../hooks';
import type { IndexSpec } from '../indexes';
import type { Collection } from './collection';

type CatalogEvent = Omit<ChangeEvent, 'clusterTime'>;

/**
 * CollectionOptions::appendBSON's field order (src/mongo/db/catalog/collection_options.cpp): the
 * order of a create entry's options (`o` minus `create`) and of collMod's `collectionOptions_old`.
 */
const OPTION_ORDER = [
  'capped', 'size', 'max', 'autoIndexId', 'temp', 'recordPreImages', 'changeStreamPreAndPostImages', 'storageEngine',
  'indexOptionDefaults', 'validator', 'validationLevel', 'validationAction', 'collation', 'clusteredIndex',
  'expireAfterSeconds', 'viewOn', 'pipeline', 'idIndex', 'timeseries', 'encryptedFields',
];

/** The options in mongod's order; `unsupported` names an option whose place is not sourced. */
function orderedOptions(options: Document, extra: Document = {}): { doc: Document; unsupported?: string } {
  const all: Document = { ...options, ...extra };
  const unknown = Object.keys(all).filter((k) => !OPTION_ORDER.includes(k));
  const doc: Document = {};
  for (const k of OPTION_ORDER) if (all[k] !== undefined) doc[k] = all[k];
  return unknown.length ? { doc, unsupported: `a change event showing the collection option '${unknown[0]}'` } : { doc };
}

function nsOf(c: Collection): { db: string; coll: string } {
  return { db: c.db, coll: c.name };
}

export const collectionEvents = {
  /**
   * OpObserverImpl::onCreateCollection: `o` is MutableOplogEntry::makeCreateCollCmdObj — the
   * options without the uuid, then the `_id` index spec as `idIndex` (index version 2).
   */
  created(c: Collection): CatalogEvent {
    const { doc, unsupported } = orderedOptions(c.options, { idIndex: { v: 2, key: { _id: 1 }, name: '_id_' } });
    const ev: CatalogEvent = { operationType: 'create', ns: nsOf(c), collectionUUID: c.uuid, operationDescription: doc };
    if (unsupported) ev.unsupported = unsupported;
    return ev;
  },

  /** createIndexes / commitIndexBuild: `operationDescription: { indexes: [specs] }`. */
  indexesCreated(c: Collection, specs: IndexSpec[]): CatalogEvent {
    return { operationType: 'createIndexes', ns: nsOf(c), collectionUUID: c.uuid, operationDescription: { indexes: specs.map((s) => ({ ...s })) } };
  },

  /** OpObserverImpl::onDropIndex: one entry per index, its spec in `o2`, shown as `{ indexes: [spec] }`. */
  indexDropped(c: Collection, spec: IndexSpec): CatalogEvent {
    return { operationType: 'dropIndexes', ns: nsOf(c), collectionUUID: c.uuid, operationDescription: { indexes: [{ ...spec }] } };
  },

  /**
   * OpObserverImpl::onCollMod: `o` is the collMod command (generic arguments removed, an index
   * modification normalized to its name), `o2.collectionOptions_old` the options before (with the
   * uuid), `o2.indexOptions_old` the index's options before; shown as `operationDescription` and
   * `stateBeforeChange: { collectionOptions, indexOptions }`.
   */
  modified(c: Collection, optionsBefore: Document, description: Document, indexOptionsBefore?: Document): CatalogEvent {
    const { doc, unsupported } = orderedOptions(optionsBefore);
    const stateBeforeChange: Document = { collectionOptions: { uuid: c.uuid, ...doc } };
    if (indexOptionsBefore) stateBeforeChange.indexOptions = indexOptionsBefore;
    const ev: CatalogEvent = { operationType: 'modify', ns: nsOf(c), collectionUUID: c.uuid, operationDescription: description, stateBeforeChange };
    if (unsupported) ev.unsupported = unsupported;
    return ev;
  },

  /**
   * OpObserverImpl::preRenameCollection: `o` is { renameCollection, to, stayTemp, dropTarget?: uuid };
   * the event has `ns` the source, a top-level `to`, and `operationDescription` = `o` without
   * renameCollection and stayTemp, its `to` as { db, coll }.
   */
  renamed(c: Collection, from: string, dropTarget: Collection | undefined): CatalogEvent {
    const to = nsOf(c);
    const operationDescription: Document = { to };
    if (dropTarget) operationDescription.dropTarget = dropTarget.uuid;
    return { operationType: 'rename', ns: { db: c.db, coll: from }, to, collectionUUID: c.uuid, operationDescription };
  },

  /**
   * ChangeStreamViewDefinitionEventTransformation: an insert into system.views is a `create` of the
   * view, its operationDescription the view document without `_id` ({ viewOn, pipeline, collation? });
   * no collectionUUID; database and cluster streams only.
   */
  viewCreated(db: string, name: string, definition: { viewOn: string; pipeline: Document[]; collation?: Document }): CatalogEvent {
    const operationDescription: Document = { viewOn: definition.viewOn, pipeline: definition.pipeline };
    if (definition.collation) operationDescription.collation = definition.collation;
    return { operationType: 'create', ns: { db, coll: name }, operationDescription, viewDefinition: true };
  },
};
