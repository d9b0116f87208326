/** What the deployment behind a connection supports, asked once per connection. */
import type { Connection } from 'mongoose';

const transactionSupport = new WeakMap<Connection, Promise<boolean>>();

/**
 * Transactions need a replica set member or a mongos. `hello` says which: a replica set
 * reports `setName`, a mongos reports `msg: 'isdbgrid'`.
 */
export function supportsTransactions(connection: Connection): Promise<boolean> {
  let known = transactionSupport.get(connection);
  if (!known) {
    known = (async () => {
      await connection.asPromise();
      const hello = await connection.getClient().db('admin').command({ hello: 1 });
      return typeof hello.setName === 'string' || hello.msg === 'isdbgrid';
    })();
    // A failed probe is not remembered, so the next call asks again.
    known.catch(() => transactionSupport.delete(connection));
    transactionSupport.set(connection, known);
  }
  return known;
}
