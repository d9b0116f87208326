/**
 * PRODUCT.md property 14 and the README (Job workers: "The filter is a query. It is cast as
 * `Model.find(filter)` casts it"): with Mongoose's `translateAliases` (a schema option, a query
 * option or `mongoose.set('translateAliases', true)`), `Model.find({ alias: v })` queries the
 * aliased path (Query.prototype._find calls `_applyTranslateAliases()` before
 * `_castConditions()`, node_modules/mongoose/lib/query.js). lockNext's candidate read is built by
 * castNextFilter (src/next-arguments.ts: `model.find(filter)` then `query.cast(model)`), which
 * never translates aliases: the read's `$match` names the alias, matches nothing (strictQuery is
 * false by default, so the unknown path is kept), and the call answers null although a matching
 * free document exists, one `Model.find` with the same filter returns.
 */
import { Schema } from 'mongoose';
import { lockPlugin, type LockableModel, type LockMethods } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

jest.setTimeout(60_000);
const db = testDatabase('locknext_aliases');
let conn: MonitoredConnection;

beforeAll(async () => {
  conn = await connect(db.name);
});
afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

interface Job {
  status: string;
  priority: number;
}

test('a filter on a schema alias, with translateAliases, claims what Model.find finds', async () => {
  const schema = new Schema<Job, LockableModel<Job>, LockMethods>(
    { status: { type: String, alias: 'state', default: 'queued' }, priority: { type: Number, default: 0 } },
    // The schema option (Query.prototype._applyTranslateAliases reads schema._userProvidedOptions).
    { translateAliases: true } as never,
  );
  schema.plugin(lockPlugin, { ttl: 30_000 });
  const Job = conn.connection.model<Job, LockableModel<Job>>('AliasedJob', schema);
  await Job.init();
  await Job.lockModel().init();
  const [queued] = await Job.create([{ status: 'queued', priority: 1 }, { status: 'done', priority: 2 }]);
  const filter = { state: 'queued' } as unknown as Record<string, unknown>;

  // What Model.find runs for this filter: the aliased path.
  expect((await Job.find(filter)).map((d) => String(d._id))).toEqual([String(queued._id)]);

  const doc = await Job.lockNext(filter, 'worker');
  expect(doc === null ? null : String(doc._id)).toBe(String(queued._id));
  expect(await Job.isLocked(queued._id)).toBe(true);
});
