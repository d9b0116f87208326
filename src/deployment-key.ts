/**
 * Which of several connections reach one deployment, told without sending anything (lockAll
 * refuses one document listed twice, and a document is one only within one deployment: a database
 * name is a name inside it).
 *
 * Two connections reach one deployment when they share their driver client (a connection and its
 * `useDb` views), or when their clients share a server address: a seed of the connection string
 * (`MongoClient.options.hosts`, `srvHost`) or a server the client discovered (a replica set's
 * members, named as the set's `hello.hosts` names them, so two clients seeded with different names
 * of one member meet there once connected). A connection whose client is not there yet is
 * counted with every other one (names alone decide for it, so a document reached twice is never
 * missed).
 */
import type { Connection } from 'mongoose';

/** The parts of the driver's MongoClient read here (`topology` is not in its published types). */
interface ClientView {
  options?: { hosts?: readonly unknown[]; srvHost?: unknown };
  topology?: { description?: { servers?: Map<string, unknown> } };
}

function addressesOf(client: ClientView): string[] {
  const seeds = (client.options?.hosts ?? []).map((host) => String(host));
  if (typeof client.options?.srvHost === 'string') seeds.push(`srv:${client.options.srvHost}`);
  const discovered = [...(client.topology?.description?.servers?.keys() ?? [])];
  return [...seeds, ...discovered].map((address) => address.toLowerCase());
}

function clientOf(connection: Connection): ClientView | undefined {
  try {
    return (connection.getClient() as unknown as ClientView | undefined) ?? undefined;
  } catch {
    return undefined;
  }
}

/**
 * A key per connection: equal for connections that reach one deployment (see the module comment).
 */
export function deploymentKeys(connections: readonly Connection[]): (connection: Connection) => string {
  const clients = [...new Set(connections.map(clientOf))];
  // Union-find over the distinct clients: joined when they share an address; an unknown client
  // (undefined) joins every other one.
  const parent = clients.map((_, i) => i);
  const root = (i: number): number => (parent[i] === i ? i : (parent[i] = root(parent[i])));
  const join = (a: number, b: number) => {
    parent[root(a)] = root(b);
  };
  const byAddress = new Map<string, number>();
  clients.forEach((client, i) => {
    if (client === undefined) {
      clients.forEach((_, j) => join(i, j));
      return;
    }
    for (const address of addressesOf(client)) {
      const seen = byAddress.get(address);
      if (seen === undefined) byAddress.set(address, i);
      else join(i, seen);
    }
  });
  return (connection) => String(root(clients.indexOf(clientOf(connection))));
}
