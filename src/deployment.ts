/** What the deployment behind a connection supports, asked once per connection. */
import type { Connection } from 'mongoose';

/** A standalone mongod, a replica set member, or a mongos. */
export type DeploymentKind = 'standalone' | 'replicaSet' | 'sharded';

const kinds = new WeakMap<Connection, Promise<DeploymentKind>>();

/**
 * `hello` says which: a replica set reports `setName`, a mongos reports `msg: 'isdbgrid'`
 * (docs/mongodb-compatibility.md R16).
 */
export function deploymentKind(connection: Connection): Promise<DeploymentKind> {
  let known = kinds.get(connection);
  if (!known) {
    known = (async (): Promise<DeploymentKind> => {
      await connection.asPromise();
      const hello = await connection.getClient().db('admin').command({ hello: 1 });
      if (hello.msg === 'isdbgrid') return 'sharded';
      return typeof hello.setName === 'string' ? 'replicaSet' : 'standalone';
    })();
    // A failed probe is not remembered, so the next call asks again.
    known.catch(() => kinds.delete(connection));
    kinds.set(connection, known);
  }
  return known;
}

/** Transactions need a replica set member or a mongos. */
export async function supportsTransactions(connection: Connection): Promise<boolean> {
  return (await deploymentKind(connection)) !== 'standalone';
}
