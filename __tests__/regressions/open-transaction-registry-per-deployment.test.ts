/**
 * The registry of lock records an open caller transaction writes (src/guard/open-transactions.ts,
 * `callerTransactions`, one per process) refuses a lock call at once (LockedByTransactionError)
 * where mongod would make its write wait for that transaction (R17: the same record). It is keyed
 * by the lock collection's NAMESPACE and the `_id`; a namespace names a collection within one
 * deployment. A caller transaction on deployment B writing document X therefore refuses a lock on
 * the document X of deployment A (same database and collection names: a live cluster and its
 * archive, two regions, lockAll's two-deployment case in
 * regressions/lock-all-same-names-two-deployments.test.ts), although A's server has no such
 * transaction and would grant it at once. The same model on B is still refused (the control).
 *
 * Needs a replica set (caller transactions) and a second server of the test backend's kind;
 * skipped with a printed reason otherwise.
 */
import { Types } from 'mongoose';
import { replicaSetOnly } from '../support/topology';
import { testDatabase } from '../support/db';
import { twoDeployments } from '../support/two-deployments';

jest.setTimeout(90_000);

const db = testDatabase('txn_registry_deployment');
const deployments = twoDeployments(db, 'RegistryDeploymentItem', { ttl: 30_000, what: 'open-transaction registry across two deployments', replicaSetOnly: true });

replicaSetOnly('caller transactions need a replica set')(
  "a caller transaction on one deployment does not refuse a lock on the namesake document of another deployment; the same deployment's still is",
  async () => {
    if (deployments.skipped) return;
    const { Here, There, there } = deployments;
    const id = new Types.ObjectId();
    await Here.create({ _id: id, title: 'live' });
    await There.create({ _id: id, title: 'archive copy' });
    const session = await there.connection.startSession();
    try {
      session.startTransaction();
      await There.updateOne({ _id: id }, { $set: { status: 'done' } }, { session });
      // Control: on the transaction's own deployment, refused at once (tryLock: null).
      await expect(There.tryLock(id, 'alice')).resolves.toBeNull();
      // On the other deployment nothing waits for that transaction.
      const outcome = await Here.lock(id, 'alice').then(
        async (doc) => {
          const owner = doc.heldLock()!.owner;
          await doc.unlock();
          return `locked by ${owner}`;
        },
        (error: unknown) => `${(error as Error).name}`,
      );
      expect(outcome).toBe('locked by alice');
      await session.commitTransaction();
    } finally {
      await session.endSession();
    }
  },
);
