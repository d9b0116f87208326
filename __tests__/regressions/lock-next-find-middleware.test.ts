/**
 * README, Job workers: "Query middleware (`pre('find')`) does not run on the candidate read, only
 * on the load: put the conditions a hook would add into the filter", and "The document still
 * matches ... one that stopped matching in between (finished by someone else, deleted, hidden by a
 * `findOne` hook) is released at once". The load is `Model.findOne` (src/lock-next.ts attempt()),
 * which runs `findOne` middleware only: a `pre('find')` hook (a soft-delete or tenant filter
 * written for `find`) runs on neither read, so lockNext hands out a document `Model.find(filter)`
 * hides. (lockMany's load is `Model.find` and does run it: the two calls disagree.)
 */
import { Schema } from 'mongoose';
import { lockPlugin, type LockableModel, type LockMethods } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

jest.setTimeout(60_000);
const db = testDatabase('locknext_find_hook');
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
  deleted: boolean;
}

test('lockNext never returns a document the model\'s pre("find") middleware hides from Model.find', async () => {
  const schema = new Schema<Job, LockableModel<Job>, LockMethods>({ status: { type: String, default: 'queued' }, deleted: { type: Boolean, default: false } });
  schema.pre('find', function hideDeleted() {
    void this.where({ deleted: { $ne: true } });
  });
  schema.plugin(lockPlugin, { ttl: 30_000 });
  const Job = conn.connection.model<Job, LockableModel<Job>>('SoftDeletedJob', schema);
  await Job.init();
  await Job.lockModel().init();
  const [gone] = await Job.create([{ status: 'queued', deleted: true }]);

  expect(await Job.find({ status: 'queued' })).toEqual([]);
  await expect(Job.lockMany([gone._id], 'worker')).rejects.toThrow(/exists|not found|No /i);
  const doc = await Job.lockNext({ status: 'queued' }, 'worker');
  expect(doc === null ? null : { deleted: doc.deleted }).toBeNull();
});
