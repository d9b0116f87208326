/**
 * Tests that hold only on one kind of deployment. Jest decides skips when it collects the
 * tests, so the topology comes synchronously from the global setup (test-backend/test-env.ts).
 * A test for the other topology is skipped, never passed, after one printed line saying why, so
 * a standalone run shows in Jest's summary what it did not prove.
 */
import { testTopology } from '../../test-backend/test-env';

const said = new Set<string>();

function only(topology: 'replset' | 'standalone', reason: string): jest.It {
  if (testTopology() === topology) return test;
  if (!said.has(reason)) {
    said.add(reason);
    process.stdout.write(`[skipped on ${testTopology()}] ${reason}\n`);
  }
  return test.skip;
}

/** `test` on a replica set or sharded cluster (transactions, change streams); skipped on a standalone. */
export const replicaSetOnly = (reason: string): jest.It => only('replset', reason);

/** `test` on a standalone server (no transactions, no change streams); skipped elsewhere. */
export const standaloneOnly = (reason: string): jest.It => only('standalone', reason);

/** Whether the tests run against a replica set (or a mongos). */
export const onReplicaSet = (): boolean => testTopology() === 'replset';
