/**
 * The document `Model.lock` returns is the one `Model.findById(id).read('primary').session(null)`
 * returns (src/document-load.ts; docs/mongodb-compatibility.md, the document load), also when the
 * process has patched Mongoose's own Query methods, as instrumentation does:
 * @opentelemetry/instrumentation-mongoose (mongoose >=5.9.7 <10) wraps `Query.prototype.exec` and
 * `Query.prototype.findOne` of the mongoose module with shimmer
 * (open-telemetry/opentelemetry-js-contrib, packages/instrumentation-mongoose/src/mongoose.ts,
 * MongooseInstrumentation.patch: `this._wrap(moduleExports.Query.prototype, 'exec', ...)` and the
 * context-capture functions), and applications wrap them to scope every query (tenants, soft
 * deletes) or to log it.
 *
 * directLoadProblem compares the model's Query methods with `base.Query.prototype`'s, the very
 * prototype such a patch changes, so it takes the direct load and the patch never runs: the
 * lock's load escapes the process's query instrumentation, and a document that findById hides is
 * locked and handed out. (Mongoose 9's tracing channel is checked; a patch is not.)
 */
import mongoose, { Schema, type Query } from 'mongoose';
import { LockTargetNotFoundError, lockPlugin, type LockMethods } from '../../src';
import { directLoadProblem } from '../../src/document-load';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

const db = testDatabase('docloadpatched');
let conn: MonitoredConnection;
let counter = 0;

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

async function plainModel(): Promise<Lockable> {
  const model = conn.connection.model(`Patched${++counter}`, new Schema({ title: String, deleted: Boolean }).plugin(lockPlugin)) as unknown as Lockable;
  await model.init();
  return model;
}

/** Replaces `Query.prototype[name]` (Mongoose's, shared by every model) with `wrap(original)` while `fn` runs. */
async function withPatchedQuery<T>(name: 'exec' | 'findOne', wrap: (original: (...args: unknown[]) => unknown) => (this: AnyQuery, ...args: unknown[]) => unknown, fn: () => Promise<T>): Promise<T> {
  const proto = mongoose.Query.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  const original = proto[name]!;
  proto[name] = wrap(original);
  try {
    return await fn();
  } finally {
    proto[name] = original;
  }
}

test("a process-wide wrapper of Query.prototype.exec (instrumentation) sees the lock's load as it sees findById's", async () => {
  const model = await plainModel();
  const { _id: id } = await model.create({ title: 'instrumented' });
  const seen: string[] = [];
  await withPatchedQuery(
    'exec',
    (original) =>
      function exec(this: AnyQuery, ...args: unknown[]) {
        seen.push(`${this.model.modelName}.${(this as unknown as { op: string }).op}`);
        return original.apply(this, args);
      },
    async () => {
      await model.findById(id).read('primary').session(null).exec();
      const byFindById = seen.splice(0);
      expect(byFindById).toEqual([`${model.modelName}.findOne`]);
      const doc = await model.lock(id, 'owner');
      expect(seen).toEqual(byFindById);
      await doc.unlock();
    },
  );
});

test('a process-wide wrapper of Query.prototype.findOne that scopes every findOne (soft delete): a document findById hides is not locked', async () => {
  const model = await plainModel();
  const { _id: id } = await model.create({ title: 'deleted', deleted: true });
  await withPatchedQuery(
    'findOne',
    (original) =>
      function findOne(this: AnyQuery, ...args: unknown[]) {
        const query = original.apply(this, args) as AnyQuery;
        return query.where({ deleted: { $ne: true } });
      },
    async () => {
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
    },
  );
});

test("the verdict follows the prototype: findById's load while a patch is in place (whatever it is named), the direct load again once Mongoose's own function is back", async () => {
  const model = await plainModel();
  expect(directLoadProblem(model)).toBeUndefined();
  const proto = mongoose.Query.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  for (const name of ['exec', 'findOne', 'then', '_findOne'] as const) {
    const original = proto[name]!;
    // A wrapper carrying the original's name, as shimmer's does (its `__original` aside).
    proto[name] = Object.defineProperty(function (this: unknown, ...args: unknown[]) {
      return original.apply(this, args);
    }, 'name', { value: original.name });
    try {
      expect([name, directLoadProblem(model)]).toEqual([name, "Mongoose's query methods patched"]);
    } finally {
      proto[name] = original;
    }
    expect([name, directLoadProblem(model)]).toEqual([name, undefined]);
  }
  // Mongoose's own function of another name in its place is not Mongoose's own of this name.
  const findOne = proto.findOne!;
  proto.findOne = proto.find!;
  try {
    expect(directLoadProblem(model)).toBe("Mongoose's query methods patched");
  } finally {
    proto.findOne = findOne;
  }
});
