/**
 * The plugin reads lock records, loads the locked document and searches a guarded write's
 * targets from the primary whatever read
 * preference the application's connection has: a secondary may lag, and a lagging read would
 * call a held lock free or hand the holder an old version of the document to edit. The driver
 * sends a non-primary read preference as `$readPreference` in the command (OP_MSG, server
 * selection spec: "Passing read preference to mongos and load balancers" / replica sets); a
 * primary read carries none or `mode: 'primary'`.
 */
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { replicaSetOnly } from '../support/topology';
import { workItemModel, type WorkItemModel } from '../support/work-item';
import type { mongo } from 'mongoose';

const db = testDatabase('readpref');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;
const reads: mongo.Document[] = [];

beforeAll(async () => {
  conn = await connect(db.name, { readPreference: 'secondaryPreferred' });
  WorkItem = await workItemModel(conn.connection, { ttl: 5_000 });
  conn.connection.getClient().on('commandStarted', (event) => {
    if (event.commandName === 'find') reads.push(event.command);
  });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const mode = (command: mongo.Document) => (command.$readPreference as { mode?: string } | undefined)?.mode ?? 'primary';

replicaSetOnly('read preferences are sent only to replica sets and mongos')(
  'every read the plugin sends names the primary, on a connection that prefers secondaries',
  async () => {
    const { _id: id } = await WorkItem.create({ title: 'read me' });
    // The connection's own reads do carry the preference: the check below can fail.
    reads.length = 0;
    await WorkItem.findById(id);
    expect(reads.map(mode)).toEqual(['secondaryPreferred']);

    reads.length = 0;
    const item = await WorkItem.lock(id, 'holder'); // acquire + load
    await WorkItem.getLock(id);
    await WorkItem.isLocked(id);
    await expect(WorkItem.lock(id, 'other')).rejects.toThrow();
    item.title = 'saved';
    await item.save(); // the guard's check
    await item.unlock();
    // The write guard's target search (a filter that names no _id), in and out of a transaction.
    await WorkItem.updateMany({ title: 'saved' }, { $inc: { edits: 1 } });
    await WorkItem.updateOne({ title: 'saved' }, { $inc: { edits: 1 } });
    expect(reads.length).toBeGreaterThanOrEqual(3);
    expect(reads.map(mode).filter((m) => m !== 'primary')).toEqual([]);
  },
);
