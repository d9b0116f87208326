/**
 * src/document-load.ts (mongooseOwn) takes a Query / Model method for Mongoose's own when its
 * source text (Function.prototype.toString) appears as `Query.prototype.<name> = <text>` in
 * Mongoose's lib/query.js. Source text does not identify a function: the same text evaluated in
 * another scope closes over other bindings. A patch that re-evaluates Mongoose's own source with one
 * helper replaced (here `prepareDiscriminatorCriteria`, which Query.prototype.findOne calls after
 * merging the filter, given a soft-delete scope) keeps the text, so the direct load is taken and the
 * patch never runs: Model.lock locks and returns a document findById(id) does not find.
 * (Same shape as locked-document-load-patched-query.test.ts, whose wrapper has other text.)
 */
import mongoose, { Schema, type Query } from 'mongoose';
import { LockTargetNotFoundError, lockPlugin, type LockMethods } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

const db = testDatabase('docloadsamesrc');
let conn: MonitoredConnection;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyQuery = Query<any, any>;
interface Lockable extends mongoose.Model<{ title: string; deleted?: boolean }> {
  lock(id: unknown, owner: string): Promise<mongoose.HydratedDocument<{ title: string }> & LockMethods>;
  isLocked(id: unknown): Promise<boolean>;
}

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

/** Mongoose's own findOne text, evaluated where its free names are the caller's (a soft-delete scope in prepareDiscriminatorCriteria). */
function sameTextScopedFindOne(original: (...args: unknown[]) => unknown): (...args: unknown[]) => unknown {
  const text = Function.prototype.toString.call(original);
  /* eslint-disable @typescript-eslint/no-require-imports */
  const MongooseError = require('mongoose/lib/error/mongooseError') as unknown;
  const ObjectParameterError = require('mongoose/lib/error/objectParameter') as unknown;
  /* eslint-enable @typescript-eslint/no-require-imports */
  const canMerge = (conditions: unknown) => conditions != null && typeof conditions === 'object';
  const prepareDiscriminatorCriteria = (query: AnyQuery) => {
    query.where({ deleted: { $ne: true } });
  };
  // The inner function's text is exactly `text` (only the outer factory is `anonymous`).
  // Mongoose 8's findOne asks `mquery.canMerge(conditions)` (lib/query.js), Mongoose 9's `canMerge(conditions)`.
  const mquery = { canMerge };
  const factory = new Function('MongooseError', 'ObjectParameterError', 'canMerge', 'mquery', 'prepareDiscriminatorCriteria', `return (${text});`) as (...names: unknown[]) => (...args: unknown[]) => unknown;
  return factory(MongooseError, ObjectParameterError, canMerge, mquery, prepareDiscriminatorCriteria);
}

/** findById(id) finds nothing under the scope, and Model.lock locks nothing and loads nothing either. */
async function expectLockLoadScopedLikeFindById(model: Lockable, id: unknown): Promise<void> {
  expect(await model.findById(id).read('primary').session(null).exec()).toBeNull();
  const outcome = await model.lock(id, 'owner').then(
    async (doc) => {
      await doc.unlock();
      return 'locked and loaded';
    },
    (error: unknown) => error,
  );
  expect(outcome).toBeInstanceOf(LockTargetNotFoundError);
  expect(await model.isLocked(id)).toBe(false);
}

test("a findOne patch with Mongoose's own source text (re-evaluated in another scope) scopes the lock's load as it scopes findById's", async () => {
  const model = conn.connection.model('SameSource', new Schema({ title: String, deleted: Boolean }).plugin(lockPlugin)) as unknown as Lockable;
  await model.init();
  const { _id: id } = await model.create({ title: 'deleted', deleted: true });
  const proto = mongoose.Query.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  const original = proto.findOne!;
  const patched = sameTextScopedFindOne(original);
  expect(Function.prototype.toString.call(patched)).toBe(Function.prototype.toString.call(original));
  proto.findOne = patched;
  try {
    await expectLockLoadScopedLikeFindById(model, id);
  } finally {
    proto.findOne = original;
  }
});

/**
 * zone.js (Angular, also in Node for server-side rendering) replaces Function.prototype.toString so
 * that a function it patched reads as the original: angular/zone.js lib/common/to-string.ts
 * (`if (this[zoneSymbol('OriginalDelegate')]) return originalFunctionToString.apply(this[...])`),
 * and its patchMethod marks every wrapper so (lib/common/utils.ts, attachOriginToPatched:
 * `patched[zoneSymbol('OriginalDelegate')] = original`; zoneSymbol(name) is '__zone_symbol__' + name).
 * mongooseOwn calls the CURRENT Function.prototype.toString, so such a wrapper of findOne is taken
 * for Mongoose's own and never runs for the lock's load.
 */
test("under zone.js's Function.prototype.toString, a zone-marked wrapper of findOne (soft-delete scope) scopes the lock's load as it scopes findById's", async () => {
  const model = conn.connection.model('ZoneMarked', new Schema({ title: String, deleted: Boolean }).plugin(lockPlugin)) as unknown as Lockable;
  await model.init();
  const { _id: id } = await model.create({ title: 'deleted', deleted: true });
  const ORIGINAL_DELEGATE = '__zone_symbol__OriginalDelegate';
  const nativeToString = Function.prototype.toString;
  // zone.js lib/common/to-string.ts, as it installs itself.
  const zoneToString = function toString(this: unknown, ...args: unknown[]): string {
    if (typeof this === 'function') {
      const originalDelegate = (this as unknown as Record<string, unknown>)[ORIGINAL_DELEGATE];
      if (typeof originalDelegate === 'function') return nativeToString.apply(originalDelegate, args as []);
    }
    return nativeToString.apply(this, args as []);
  };
  const proto = mongoose.Query.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  const original = proto.findOne!;
  const wrapper = function findOne(this: AnyQuery, ...args: unknown[]) {
    const query = original.apply(this, args) as AnyQuery;
    return query.where({ deleted: { $ne: true } });
  };
  (wrapper as unknown as Record<string, unknown>)[ORIGINAL_DELEGATE] = original; // attachOriginToPatched
  Function.prototype.toString = zoneToString;
  proto.findOne = wrapper as (...args: unknown[]) => unknown;
  try {
    await expectLockLoadScopedLikeFindById(model, id);
  } finally {
    proto.findOne = original;
    Function.prototype.toString = nativeToString;
  }
});
