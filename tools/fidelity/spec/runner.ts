/**
 * A unified-format test runner (mongodb/specifications source/unified-test-format) for the
 * emulator: entities (client, database, collection, session, change stream, cursor), the operations
 * the CRUD, transactions, change-streams, retryable-writes and sessions suites use, expectResult,
 * expectError, expectEvents (command events) and outcome. Written for this project; it runs test
 * files read from a checkout given at run time and contains none of their data.
 */
import { EJSON, type Document, type Timestamp } from 'bson';
import {
  MongoBulkWriteError,
  MongoClient,
  MongoServerError,
  MongoWriteConcernError,
  type ChangeStream,
  type ClientSession,
  type Collection,
  type CommandFailedEvent,
  type CommandStartedEvent,
  type CommandSucceededEvent,
  type Db,
  type FindCursor,
} from 'mongodb';
import { isPlainDoc, match, matchRootArray, MatchError, type MatchContext } from './match';

export const SERVER_VERSION = [7, 0, 14];

export class SkipTest extends Error {}

type Event = { type: 'commandStartedEvent' | 'commandSucceededEvent' | 'commandFailedEvent'; ev: CommandStartedEvent | CommandSucceededEvent | CommandFailedEvent };

interface ClientEntity {
  kind: 'client';
  client: MongoClient;
  observe: Set<string>;
  ignore: Set<string>;
  events: Event[];
}

type Entity =
  | ClientEntity
  | { kind: 'database'; db: Db; client: string }
  | { kind: 'collection'; coll: Collection<Document>; client: string }
  | { kind: 'session'; session: ClientSession; lsid: Document; client: string }
  | { kind: 'stream'; stream: ChangeStream<Document> }
  | { kind: 'cursor'; cursor: FindCursor<Document> }
  | { kind: 'value'; value: unknown };

/** Commands never observed (unified format, "observeSensitiveCommands" and hello handling). */
const SENSITIVE = new Set(['hello', 'ismaster', 'isMaster', 'saslStart', 'saslContinue', 'getnonce', 'authenticate', 'createUser', 'updateUser', 'copydbgetnonce', 'copydbsaslstart', 'copydb']);

function versionTuple(v: string): number[] {
  return v.split('.').map((x) => Number(x));
}

function cmpVersion(a: number[], b: number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d) return d;
  }
  return 0;
}

/** Whether runOnRequirements allow this deployment (a 7.0 replica set or standalone, no auth, no csfle). */
export function requirementsMet(reqs: Document[] | undefined, topology: 'replicaset' | 'single'): boolean {
  if (!reqs || !reqs.length) return true;
  return reqs.some((r) => {
    if (r.minServerVersion && cmpVersion(SERVER_VERSION, versionTuple(r.minServerVersion)) < 0) return false;
    if (r.maxServerVersion && cmpVersion(SERVER_VERSION, versionTuple(r.maxServerVersion)) > 0) return false;
    if (r.topologies && !(r.topologies as string[]).includes(topology)) return false;
    if (r.serverless === 'require') return false;
    if (r.auth === true || r.authMechanism) return false;
    if (r.csfle) return false;
    if (r.serverParameters) return false;
    return true;
  });
}

export class UnifiedRun implements MatchContext {
  readonly entities = new Map<string, Entity>();

  constructor(
    private readonly uri: string,
    private readonly internal: MongoClient,
  ) {}

  entity(name: string): unknown {
    const e = this.entities.get(name);
    if (!e) throw new MatchError(`no entity ${name}`);
    return e.kind === 'value' ? e.value : e;
  }

  sessionLsid(name: string): Document | undefined {
    const e = this.entities.get(name);
    return e?.kind === 'session' ? e.lsid : undefined;
  }

  private get<K extends Entity['kind']>(name: string, kind: K): Extract<Entity, { kind: K }> {
    const e = this.entities.get(name);
    if (!e || e.kind !== kind) throw new Error(`entity ${name} is not a ${kind}`);
    return e as Extract<Entity, { kind: K }>;
  }

  async createEntities(list: Document[]): Promise<void> {
    for (const item of list) {
      const [kind] = Object.keys(item);
      const spec = item[kind] as Document;
      const id = spec.id as string;
      switch (kind) {
        case 'client': {
          const params = new URLSearchParams();
          for (const [k, v] of Object.entries((spec.uriOptions as Document | undefined) ?? {})) {
            params.set(k, isPlainDoc(v) ? Object.entries(v).map(([a, b]) => `${a}:${String(b)}`).join(',') : String(v));
          }
          if (spec.useMultipleMongoses === false) {
            // A replica set has one primary: nothing to pin.
          }
          const q = params.toString();
          const uri = q ? `${this.uri}${this.uri.includes('?') ? '&' : '?'}${q}` : this.uri;
          const client = new MongoClient(uri, { monitorCommands: true, serverSelectionTimeoutMS: 5000, heartbeatFrequencyMS: 500 });
          const observe = new Set<string>((spec.observeEvents as string[] | undefined) ?? []);
          const ignore = new Set<string>((spec.ignoreCommandMonitoringEvents as string[] | undefined) ?? []);
          const entity: ClientEntity = { kind: 'client', client, observe, ignore, events: [] };
          const push = (type: Event['type']) => (ev: Event['ev']) => {
            if (!observe.has(type) || ignore.has(ev.commandName) || SENSITIVE.has(ev.commandName)) return;
            if (ev.commandName === 'configureFailPoint') return;
            entity.events.push({ type, ev });
          };
          client.on('commandStarted', push('commandStartedEvent'));
          client.on('commandSucceeded', push('commandSucceededEvent'));
          client.on('commandFailed', push('commandFailedEvent'));
          await client.connect();
          this.entities.set(id, entity);
          break;
        }
        case 'database': {
          const c = this.get(spec.client as string, 'client');
          const opts = (spec.databaseOptions as Document | undefined) ?? {};
          this.entities.set(id, { kind: 'database', db: c.client.db(spec.databaseName as string, collOptions(opts)), client: spec.client as string });
          break;
        }
        case 'collection': {
          const d = this.get(spec.database as string, 'database');
          const opts = (spec.collectionOptions as Document | undefined) ?? {};
          this.entities.set(id, { kind: 'collection', coll: d.db.collection(spec.collectionName as string, collOptions(opts)), client: d.client });
          break;
        }
        case 'session': {
          const c = this.get(spec.client as string, 'client');
          const so = (spec.sessionOptions as Document | undefined) ?? {};
          const { snapshotTime, ...rest } = so;
          const session = c.client.startSession(sessionOptions(rest));
          // sessionOptions.snapshotTime (sessions/snapshot-sessions.md, "snapshotTime"): the Node
          // driver has no such option; it keeps the time in the session's internal `snapshotTime`,
          // which it sends as atClusterTime, so the runner sets that (the value is a saved entity).
          if (snapshotTime !== undefined) {
            const saved = typeof snapshotTime === 'string' ? this.get(snapshotTime, 'value').value : snapshotTime;
            (session as unknown as SnapshotSession).snapshotTime = saved as Timestamp;
          }
          this.entities.set(id, { kind: 'session', session, lsid: session.id as Document, client: spec.client as string });
          break;
        }
        default:
          throw new SkipTest(`entity kind ${kind} is not supported by this runner`);
      }
    }
  }

  async close(): Promise<void> {
    for (const e of this.entities.values()) {
      if (e.kind === 'session') await e.session.endSession().catch(() => undefined);
      if (e.kind === 'stream') await e.stream.close().catch(() => undefined);
      if (e.kind === 'cursor') await e.cursor.close().catch(() => undefined);
    }
    for (const e of this.entities.values()) if (e.kind === 'client') await e.client.close(true).catch(() => undefined);
    this.entities.clear();
  }

  // ---- operations ----------------------------------------------------------------------------

  async runOperation(op: Document): Promise<void> {
    const expectError = op.expectError as Document | undefined;
    let result: unknown;
    let error: unknown;
    try {
      result = await this.execute(op);
    } catch (e) {
      if (e instanceof SkipTest || e instanceof MatchError) throw e;
      error = e;
    }
    if (expectError) {
      if (error === undefined) throw new MatchError(`${op.name}: expected an error ${EJSON.stringify(expectError)}, got result ${safe(result)}`);
      this.checkError(op.name as string, expectError, error);
      return;
    }
    if (error !== undefined && !op.ignoreResultAndError) throw new MatchError(`${op.name}: unexpected error ${describeError(error)}`);
    if (op.saveResultAsEntity) this.entities.set(op.saveResultAsEntity as string, wrapResult(result));
    if (op.expectResult !== undefined && !op.ignoreResultAndError) {
      const rootArrays = ['find', 'aggregate', 'listCollections', 'listIndexes', 'listDatabases'];
      if (rootArrays.includes(op.name as string) && Array.isArray(op.expectResult)) matchRootArray(op.expectResult, result, this);
      else match(op.expectResult, normalizeResult(result), { root: true, ctx: this });
    }
  }

  private checkError(name: string, exp: Document, error: unknown): void {
    const server = error instanceof MongoServerError || error instanceof MongoBulkWriteError || error instanceof MongoWriteConcernError;
    const e = error as { code?: number; codeName?: string; message?: string; errorLabels?: string[]; errorResponse?: Document; result?: unknown; hasErrorLabel?: (l: string) => boolean };
    const where = `${name}: error ${describeError(error)}`;
    if (exp.isClientError === true && server) throw new MatchError(`${where} is a server error, expected a client error`);
    if (exp.isClientError === false && !server) throw new MatchError(`${where} is a client error, expected a server error`);
    if (exp.isTimeoutError !== undefined) throw new SkipTest('isTimeoutError (CSOT) is not supported by this runner');
    if (exp.errorContains !== undefined && !String(e.message).toLowerCase().includes(String(exp.errorContains).toLowerCase())) {
      throw new MatchError(`${where} does not contain ${JSON.stringify(exp.errorContains)}`);
    }
    const code = e.code ?? (e as { errorResponse?: Document }).errorResponse?.code;
    if (exp.errorCode !== undefined && code !== exp.errorCode) throw new MatchError(`${where}: expected code ${exp.errorCode}`);
    if (exp.errorCodeName !== undefined && e.codeName !== exp.errorCodeName && e.errorResponse?.codeName !== exp.errorCodeName) {
      throw new MatchError(`${where}: expected codeName ${exp.errorCodeName}, got ${e.codeName ?? e.errorResponse?.codeName}`);
    }
    const labels = new Set<string>(e.errorLabels ?? []);
    for (const l of (exp.errorLabelsContain as string[] | undefined) ?? []) if (!labels.has(l)) throw new MatchError(`${where}: missing label ${l} (labels ${[...labels].join(',')})`);
    for (const l of (exp.errorLabelsOmit as string[] | undefined) ?? []) if (labels.has(l)) throw new MatchError(`${where}: unexpected label ${l}`);
    if (exp.errorResponse !== undefined) match(exp.errorResponse, e.errorResponse, { root: true, ctx: this });
    if (exp.expectResult !== undefined) match(exp.expectResult, normalizeResult(e.result), { root: true, ctx: this });
    if (exp.writeErrors !== undefined || exp.writeConcernErrors !== undefined) throw new SkipTest('expectError.writeErrors (client bulkWrite) is not supported by this runner');
  }

  private sessionArg(args: Document): ClientSession | undefined {
    return args.session ? this.get(args.session as string, 'session').session : undefined;
  }

  private async execute(op: Document): Promise<unknown> {
    const name = op.name as string;
    const object = op.object as string;
    const args = { ...((op.arguments as Document | undefined) ?? {}) };
    if (object === 'testRunner') return this.testRunnerOp(name, args);
    const session = this.sessionArg(args);
    delete args.session;
    const target = this.entities.get(object);
    if (!target) throw new Error(`no entity ${object}`);
    const opts = (extra: Document = {}): Document => ({ ...extra, ...(session ? { session } : {}) });
    switch (target.kind) {
      case 'collection':
        return this.collectionOp(target.coll, name, args, opts);
      case 'database':
        return this.databaseOp(target.db, name, args, opts);
      case 'client':
        return this.clientOp(target.client, name, args, opts);
      case 'session':
        return this.sessionOp(target.session, name, args);
      case 'stream':
        return this.iterate(target.stream, name);
      case 'cursor':
        return this.iterateCursor(target.cursor, name);
      default:
        throw new SkipTest(`operations on ${target.kind} entities are not supported`);
    }
  }

  private async collectionOp(coll: Collection<Document>, name: string, a: Document, opts: (x?: Document) => Document): Promise<unknown> {
    const { filter, update, document, documents, replacement, pipeline, fieldName, requests, keys, ...rest } = a;
    // The unified format spells returnDocument 'Before' / 'After'; the Node driver takes lower case.
    if (typeof rest.returnDocument === 'string') rest.returnDocument = rest.returnDocument.toLowerCase();
    switch (name) {
      case 'insertOne':
        return coll.insertOne(document as Document, opts(rest));
      case 'insertMany':
        return coll.insertMany(documents as Document[], opts(rest));
      case 'updateOne':
        return coll.updateOne(filter as Document, update as Document, opts(rest));
      case 'updateMany':
        return coll.updateMany(filter as Document, update as Document, opts(rest));
      case 'replaceOne':
        return coll.replaceOne(filter as Document, replacement as Document, opts(rest));
      case 'deleteOne':
        return coll.deleteOne(filter as Document, opts(rest));
      case 'deleteMany':
        return coll.deleteMany(filter as Document, opts(rest));
      case 'findOneAndUpdate':
        return coll.findOneAndUpdate(filter as Document, update as Document, opts(rest));
      case 'findOneAndReplace':
        return coll.findOneAndReplace(filter as Document, replacement as Document, opts(rest));
      case 'findOneAndDelete':
        return coll.findOneAndDelete(filter as Document, opts(rest));
      case 'find':
        return coll.find(filter as Document, opts(rest)).toArray();
      case 'findOne':
        return coll.findOne(filter as Document, opts(rest));
      case 'createFindCursor':
        return started(coll.find(filter as Document, opts(rest)));
      case 'aggregate':
        return coll.aggregate(pipeline as Document[], opts(rest)).toArray();
      case 'countDocuments':
        return coll.countDocuments(filter as Document, opts(rest));
      case 'estimatedDocumentCount':
        return coll.estimatedDocumentCount(opts(rest));
      case 'count':
        return coll.count(filter as Document, opts(rest));
      case 'distinct':
        return coll.distinct(fieldName as string, filter as Document, opts(rest));
      case 'bulkWrite':
        return coll.bulkWrite(requests as never, opts(rest));
      case 'createIndex':
        return coll.createIndex(keys as Document, opts(rest));
      case 'dropIndex':
        return coll.dropIndex(rest.name as string, opts());
      case 'listIndexes':
        return coll.listIndexes(opts(rest)).toArray();
      case 'drop':
        return coll.drop(opts(rest));
      case 'rename':
        return coll.rename(rest.to as string, opts({ dropTarget: rest.dropTarget }));
      case 'createChangeStream':
        return started(coll.watch(pipeline as Document[], opts(rest)));
      default:
        throw new SkipTest(`collection operation ${name} is not supported by this runner`);
    }
  }

  private async databaseOp(db: Db, name: string, a: Document, opts: (x?: Document) => Document): Promise<unknown> {
    switch (name) {
      case 'runCommand': {
        const o: Document = {};
        if (a.readPreference) o.readPreference = a.readPreference;
        return db.command(a.command as Document, opts(o));
      }
      case 'aggregate':
        return db.aggregate(a.pipeline as Document[], opts(omit(a, ['pipeline']))).toArray();
      case 'createCollection':
        return db.createCollection(a.collection as string, opts(omit(a, ['collection'])));
      case 'dropCollection':
        return db.dropCollection(a.collection as string, opts(omit(a, ['collection'])));
      case 'listCollections':
        return db.listCollections(a.filter as Document, opts(omit(a, ['filter']))).toArray();
      case 'listCollectionNames':
        return (await db.listCollections(a.filter as Document, opts({ nameOnly: true })).toArray()).map((c) => c.name);
      case 'createChangeStream':
        return started(db.watch(a.pipeline as Document[], opts(omit(a, ['pipeline']))));
      case 'modifyCollection':
        return db.command({ collMod: a.collection, ...omit(a, ['collection']) }, opts());
      default:
        throw new SkipTest(`database operation ${name} is not supported by this runner`);
    }
  }

  private async clientOp(client: MongoClient, name: string, a: Document, opts: (x?: Document) => Document): Promise<unknown> {
    switch (name) {
      case 'listDatabases':
        return (await client.db('admin').admin().listDatabases(opts(omit(a, ['filter'])))).databases;
      case 'listDatabaseNames':
        return (await client.db('admin').admin().listDatabases(opts({ nameOnly: true }))).databases.map((d) => d.name);
      case 'createChangeStream':
        return started(client.watch(a.pipeline as Document[], opts(omit(a, ['pipeline']))));
      default:
        throw new SkipTest(`client operation ${name} is not supported by this runner`);
    }
  }

  private async sessionOp(session: ClientSession, name: string, a: Document): Promise<unknown> {
    switch (name) {
      case 'startTransaction':
        return session.startTransaction(a as never);
      case 'commitTransaction':
        return session.commitTransaction();
      case 'abortTransaction':
        return session.abortTransaction();
      case 'endSession':
        return session.endSession();
      case 'getSnapshotTime':
        // The time the driver took from the session's first snapshot read (see createEntities).
        return (session as unknown as SnapshotSession).snapshotTime;
      case 'withTransaction':
        return session.withTransaction(async () => {
          for (const o of (a.callback as Document[]) ?? []) await this.runOperation(o);
        }, omit(a, ['callback']) as never);
      default:
        throw new SkipTest(`session operation ${name} is not supported by this runner`);
    }
  }

  private async iterate(stream: ChangeStream<Document>, name: string): Promise<unknown> {
    if (name === 'iterateUntilDocumentOrError') {
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline) {
        const doc = await stream.tryNext();
        if (doc) return doc;
      }
      throw new MatchError('change stream returned no document within 10 s');
    }
    if (name === 'iterateOnce') return stream.tryNext();
    if (name === 'close') return stream.close();
    throw new SkipTest(`change stream operation ${name} is not supported`);
  }

  private async iterateCursor(cursor: FindCursor<Document>, name: string): Promise<unknown> {
    if (name === 'iterateUntilDocumentOrError') return cursor.next();
    if (name === 'iterateOnce') return cursor.tryNext();
    if (name === 'close') return cursor.close();
    throw new SkipTest(`cursor operation ${name} is not supported`);
  }

  private async testRunnerOp(name: string, a: Document): Promise<unknown> {
    switch (name) {
      case 'failPoint':
      case 'targetedFailPoint': {
        const c = name === 'failPoint' ? this.get(a.client as string, 'client').client : this.internal;
        await c.db('admin').command(a.failPoint as Document);
        this.failPointsSet.add(String((a.failPoint as Document).configureFailPoint));
        return undefined;
      }
      case 'createEntities':
        return this.createEntities(a.entities as Document[]);
      case 'assertSessionTransactionState': {
        const s = this.get(a.session as string, 'session').session as unknown as { transaction: { state: string } };
        const map: Record<string, string> = { NO_TRANSACTION: 'none', STARTING_TRANSACTION: 'starting', TRANSACTION_IN_PROGRESS: 'in_progress', TRANSACTION_COMMITTED: 'committed', TRANSACTION_ABORTED: 'aborted' };
        const actual = map[s.transaction.state] ?? s.transaction.state;
        if (actual !== a.state) throw new MatchError(`session state ${actual}, expected ${String(a.state)}`);
        return undefined;
      }
      case 'assertSessionPinned':
      case 'assertSessionUnpinned': {
        const s = this.get(a.session as string, 'session').session as unknown as { isPinned: boolean };
        // A replica set never pins a session to a mongos.
        if (name === 'assertSessionPinned' && !s.isPinned) throw new MatchError('session is not pinned');
        if (name === 'assertSessionUnpinned' && s.isPinned) throw new MatchError('session is pinned');
        return undefined;
      }
      case 'assertSessionDirty':
      case 'assertSessionNotDirty': {
        const s = this.get(a.session as string, 'session').session as unknown as { serverSession?: { isDirty: boolean } };
        const dirty = !!s.serverSession?.isDirty;
        if ((name === 'assertSessionDirty') !== dirty) throw new MatchError(`session dirty=${dirty}`);
        return undefined;
      }
      case 'assertSameLsidOnLastTwoCommands':
      case 'assertDifferentLsidOnLastTwoCommands': {
        const c = this.get(a.client as string, 'client');
        const started = c.events.filter((e) => e.type === 'commandStartedEvent').map((e) => (e.ev as CommandStartedEvent).command.lsid as Document);
        const [x, y] = started.slice(-2);
        const same = EJSON.stringify(x) === EJSON.stringify(y);
        if ((name === 'assertSameLsidOnLastTwoCommands') !== same) throw new MatchError(`lsids ${same ? 'equal' : 'differ'}`);
        return undefined;
      }
      case 'assertCollectionExists':
      case 'assertCollectionNotExists': {
        const names = (await this.internal.db(a.databaseName as string).listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name);
        const exists = names.includes(a.collectionName as string);
        if ((name === 'assertCollectionExists') !== exists) throw new MatchError(`collection ${String(a.collectionName)} exists=${exists}`);
        return undefined;
      }
      case 'assertIndexExists':
      case 'assertIndexNotExists': {
        const idx = await this.internal.db(a.databaseName as string).collection(a.collectionName as string).listIndexes().toArray().catch(() => []);
        const exists = idx.some((i) => i.name === a.indexName);
        if ((name === 'assertIndexExists') !== exists) throw new MatchError(`index ${String(a.indexName)} exists=${exists}`);
        return undefined;
      }
      case 'wait':
        await new Promise((r) => setTimeout(r, Number(a.ms)));
        return undefined;
      default:
        throw new SkipTest(`testRunner operation ${name} is not supported by this runner`);
    }
  }

  /** Names of the fail points this test configured (disabled after the test, as the unified format requires). */
  readonly failPointsSet = new Set<string>(['failCommand']);

  checkEvents(expectations: Document[]): void {
    for (const exp of expectations) {
      if (exp.eventType && exp.eventType !== 'command') throw new SkipTest(`${String(exp.eventType)} events are not supported by this runner`);
      const c = this.get(exp.client as string, 'client');
      const actual = c.events;
      const expected = exp.events as Document[];
      if (exp.ignoreExtraEvents ? actual.length < expected.length : actual.length !== expected.length) {
        throw new MatchError(`client ${String(exp.client)}: expected ${expected.length} events, got ${actual.length}: ${actual.map((e) => `${e.type}:${e.ev.commandName}`).join(', ')}`);
      }
      expected.forEach((e, i) => {
        const [type] = Object.keys(e);
        const spec = e[type] as Document;
        const got = actual[i];
        if (got.type !== type) throw new MatchError(`event ${i}: expected ${type}, got ${got.type}:${got.ev.commandName}`);
        if (spec.commandName !== undefined && got.ev.commandName !== spec.commandName) throw new MatchError(`event ${i}: expected command ${String(spec.commandName)}, got ${got.ev.commandName}`);
        if (type === 'commandStartedEvent') {
          const ev = got.ev as CommandStartedEvent;
          if (spec.databaseName !== undefined && ev.databaseName !== spec.databaseName) throw new MatchError(`event ${i}: database ${ev.databaseName}`);
          if (spec.command !== undefined) match(spec.command, tolerateDriverWtimeout(spec.command as Document, ev.command), { root: true, ctx: this, path: `event ${i}.command` });
        }
        if (type === 'commandSucceededEvent' && spec.reply !== undefined) match(spec.reply, (got.ev as CommandSucceededEvent).reply, { root: true, ctx: this, path: `event ${i}.reply` });
      });
    }
  }
}

/**
 * The unified format requires createChangeStream / createFindCursor to run the server command
 * (aggregate / find) as part of the operation; the Node driver is lazy, so initialise the cursor
 * (as the driver's own runner does, through its internal cursorInit).
 */
async function started<T extends object>(x: T): Promise<T> {
  const cursor = ((x as { cursor?: unknown }).cursor ?? x) as { cursorInit?: () => Promise<void> };
  if (typeof cursor.cursorInit === 'function') await cursor.cursorInit();
  return x;
}

/**
 * Node driver 7.8 adds `wtimeout: 10000` to the majority write concern of commitTransaction and
 * abortTransaction even on a first attempt; that is the driver's behaviour, not the server's, so it
 * is ignored when the test does not expect a wtimeout (runner deviation, listed in FIDELITY.md).
 */
function tolerateDriverWtimeout(expected: Document, actual: Document): Document {
  const wc = actual.writeConcern as Document | undefined;
  const ewc = expected.writeConcern as Document | undefined;
  if (!wc || wc.wtimeout === undefined || (ewc && isPlainDoc(ewc) && 'wtimeout' in ewc)) return actual;
  const { wtimeout: _ignored, ...rest } = wc;
  return { ...actual, writeConcern: rest };
}

function omit(a: Document, keys: string[]): Document {
  const out: Document = {};
  for (const [k, v] of Object.entries(a)) if (!keys.includes(k)) out[k] = v;
  return out;
}

function collOptions(o: Document): Document {
  const out: Document = {};
  if (o.readConcern) out.readConcern = o.readConcern;
  if (o.writeConcern) out.writeConcern = o.writeConcern;
  if (o.readPreference) out.readPreference = o.readPreference;
  return out;
}

/** The Node driver's internal field holding a snapshot session's time (not in its public types). */
interface SnapshotSession {
  snapshotTime?: Timestamp;
}

function sessionOptions(o: Document): Document {
  const out: Document = { ...o };
  if (o.defaultTransactionOptions) out.defaultTransactionOptions = o.defaultTransactionOptions;
  return out;
}

function wrapResult(result: unknown): Entity {
  const r = result as { _bsontype?: string; tryNext?: unknown; next?: unknown; watch?: unknown };
  if (r && typeof r === 'object' && typeof (r as { tryNext?: unknown }).tryNext === 'function' && 'resumeToken' in (r as object)) return { kind: 'stream', stream: result as ChangeStream<Document> };
  if (r && typeof r === 'object' && typeof (r as { next?: unknown }).next === 'function' && typeof (r as { toArray?: unknown }).toArray === 'function') return { kind: 'cursor', cursor: result as FindCursor<Document> };
  return { kind: 'value', value: result };
}

/** Driver result objects as the unified format names them. */
function normalizeResult(result: unknown): unknown {
  if (result && typeof result === 'object' && !Array.isArray(result)) {
    const r = result as Document;
    if ('insertedCount' in r && 'matchedCount' in r && 'deletedCount' in r) {
      return { insertedCount: r.insertedCount, matchedCount: r.matchedCount, modifiedCount: r.modifiedCount, deletedCount: r.deletedCount, upsertedCount: r.upsertedCount, upsertedIds: r.upsertedIds, insertedIds: r.insertedIds };
    }
  }
  return result;
}

export function describeError(e: unknown): string {
  const x = e as { name?: string; code?: number; codeName?: string; message?: string };
  return `${x?.name ?? 'Error'}${x?.code !== undefined ? ` ${x.code}` : ''}${x?.codeName ? ` ${x.codeName}` : ''}: ${x?.message ?? String(e)}`;
}

function safe(v: unknown): string {
  try {
    return EJSON.stringify(v as Document, { relaxed: true }).slice(0, 300);
  } catch {
    return String(v);
  }
}
