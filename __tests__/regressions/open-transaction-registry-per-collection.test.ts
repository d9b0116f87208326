/**
 * The registry of lock records an open caller transaction writes (src/guard/open-transactions.ts)
 * is keyed by the lock collection's namespace and the `_id`. The store held Mongoose's collection
 * wrapper, which does not pass the driver's `namespace` getter on (Mongoose's NativeCollection
 * wraps methods only, lib/drivers/node-mongodb-native/collection.js: "Skip properties with
 * getters"), so every lock collection was keyed as `undefined`: a caller transaction writing
 * document X of one model refused a lock on the document with the same `_id` of ANOTHER model
 * (another collection, another lock collection) with LockedByTransactionError, although mongod
 * would not make that write wait (R17 concerns the same record only). Found while merging the
 * lockAll duplicate check (issue 17 follow-ups).
 */
import { Types } from 'mongoose';
import { replicaSetOnly } from '../support/topology';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('txn_registry_ns');
let conn: MonitoredConnection;
let Orders: WorkItemModel;
let Invoices: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  Orders = await workItemModel(conn.connection, { ttl: 30_000 }, 'RegistryOrder');
  Invoices = await workItemModel(conn.connection, { ttl: 30_000 }, 'RegistryInvoice');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

replicaSetOnly('caller transactions need a replica set')(
  "a caller transaction writing one model's document does not refuse a lock on another model's document with the same _id; the same model's still is",
  async () => {
    const id = new Types.ObjectId();
    await Orders.create({ _id: id, title: 'order' });
    await Invoices.create({ _id: id, title: 'invoice' });
    const session = await conn.connection.startSession();
    try {
      session.startTransaction();
      await Orders.updateOne({ _id: id }, { $set: { status: 'paid' } }, { session });
      const invoice = await Invoices.lock(id, 'alice');
      expect(invoice.heldLock()!.owner).toBe('alice');
      await invoice.unlock();
      await expect(Orders.tryLock(id, 'alice')).resolves.toBeNull();
      await session.commitTransaction();
    } finally {
      await session.endSession();
    }
  },
  30_000,
);
