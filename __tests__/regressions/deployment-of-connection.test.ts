/**
 * deploymentOf (src/deployment-key.ts) names the deployment a connection reaches, for the
 * process-wide maps keyed by lock collection and `_id` (held-lock.ts, the leases;
 * guard/open-transactions.ts). Two deployments must get two keys (a namespace names a collection
 * only within one: lease-map-two-deployments.test.ts), and every client of one deployment one key,
 * also a client made later (a reconnect) once the first is gone: else a resume through it would
 * not join the lease of the instances that carry the acquisition (property 13). Clients are
 * stand-ins with the fields the driver's MongoClient has (`options.hosts`, `topology.description.servers`).
 */
import type { Connection } from 'mongoose';
import { deploymentOf } from '../../src/deployment-key';

let port = 41_000 + Math.floor(Math.random() * 1_000);
const nextHost = () => `db-${port++}.example:27017`;

function connectionTo(hosts: string[], discovered: string[] = []): Connection {
  const client = { options: { hosts }, topology: { description: { servers: new Map(discovered.map((h) => [h, {}])) } } };
  return { getClient: () => client } as unknown as Connection;
}

test('two clients of one deployment (same seed, or a seed the other discovered) share a key; another deployment has its own', () => {
  const [a, b, other] = [nextHost(), nextHost(), nextHost()];
  const first = deploymentOf(connectionTo([a], [a, b]));
  expect(deploymentOf(connectionTo([a]))).toBe(first);
  expect(deploymentOf(connectionTo([b]))).toBe(first); // seeded with the member the first discovered
  expect(deploymentOf(connectionTo([other]))).not.toBe(first);
});

test('a client made after the first one is gone (a reconnect) gets the same key; a connection with no client yet gets 0', () => {
  const host = nextHost();
  const key = deploymentOf(connectionTo([host.toUpperCase()]));
  expect(deploymentOf(connectionTo([host]))).toBe(key); // addresses compared in lower case
  expect(deploymentOf({ getClient: () => undefined } as unknown as Connection)).toBe('0');
});

test('one client keeps its key whatever it discovers later', () => {
  const [seed, later] = [nextHost(), nextHost()];
  const connection = connectionTo([seed]);
  const key = deploymentOf(connection);
  (connection.getClient() as unknown as { topology: { description: { servers: Map<string, unknown> } } }).topology.description.servers.set(later, {});
  expect(deploymentOf(connection)).toBe(key);
});
