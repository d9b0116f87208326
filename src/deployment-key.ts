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

/**
 * A name for the deployment `connection` reaches that is the same in every process: its driver
 * client's seed list (`options.hosts`, `srvHost`), lower-cased and sorted, joined by commas; ''
 * when the client is not there yet. Not a key for one deployment (deploymentOf and deploymentKeys
 * are: two seed lists may name one deployment); only a process-independent tie-break between
 * deployments (lock-group.ts canonicalOrder). Discovered servers are left out: which are known
 * depends on when the call runs.
 */
export function deploymentSeedName(connection: Connection): string {
  const client = clientOf(connection);
  if (client === undefined) return '';
  const seeds = (client.options?.hosts ?? []).map((host) => String(host).toLowerCase());
  if (typeof client.options?.srvHost === 'string') seeds.push(`srv:${client.options.srvHost.toLowerCase()}`);
  return seeds.sort().join(',');
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

/** The deployment key of each client seen (deploymentOf). */
const numbered = new WeakMap<object, string>();
/**
 * The deployment key of every server address seen so far (lower case; never forgotten: a process
 * talks to few addresses), so that a client made later (a reconnect, another connection to the
 * same servers) gets the key of the clients that reached them before, even once those are gone.
 */
const byAddress = new Map<string, string>();
let nextDeployment = 1;

/**
 * A key for the deployment `connection` reaches, the same for the whole life of its driver client
 * and for every client that shares a server address with one seen before (see the module comment).
 * For the process-wide maps keyed by lock collection and `_id` (held-lock.ts, the leases;
 * guard/open-transactions.ts): a namespace names a collection only within one deployment.
 * One WeakMap read per call once the client was seen. A connection whose client is not there yet
 * (never opened) gets '0': it has sent nothing, so nothing of it is in those maps.
 *
 * Limit: two clients of one deployment seeded with different names of one server (`localhost` and
 * `127.0.0.1`) that share no address when the second is first seen get two keys, as lockAll's
 * check counts them as two deployments (deploymentKeys).
 */
export function deploymentOf(connection: Connection): string {
  const client = clientOf(connection) as (ClientView & object) | undefined;
  if (client === undefined) return '0';
  const known = numbered.get(client);
  if (known !== undefined) return known;
  const addresses = addressesOf(client);
  let key: string | undefined;
  for (const address of addresses) if ((key = byAddress.get(address)) !== undefined) break;
  key ??= String(nextDeployment++);
  for (const address of addresses) if (!byAddress.has(address)) byAddress.set(address, key);
  numbered.set(client, key);
  return key;
}
