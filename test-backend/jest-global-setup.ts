/** Starts the test backend once for the whole Jest run and hands its URI and topology to the workers. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBackend, type Backend, type Topology } from './backend';
import { DIR_ENV } from './lock-commands';

declare global {
  var __MPL_TEST_BACKEND__: Backend | undefined;
}

/**
 * What a MONGODB_URI deployment is, from its hello reply: a replica-set member reports `setName`
 * and a mongos `msg: 'isdbgrid'` (both run transactions and change streams: 'replset' here); anything
 * else is a standalone.
 */
async function askTopology(uri: string): Promise<Topology> {
  const { MongoClient } = await import('mongodb');
  const client = new MongoClient(uri, { serverSelectionTimeoutMS: 10_000 });
  try {
    await client.connect();
    const hello = await client.db('admin').command({ hello: 1 });
    return typeof hello.setName === 'string' || hello.msg === 'isdbgrid' ? 'replset' : 'standalone';
  } finally {
    await client.close();
  }
}

export default async function globalSetup(): Promise<void> {
  // Every process of the run (Jest workers, the workers they spawn) records the shapes of the
  // commands it sends to lock collections here; the global teardown checks them.
  process.env[DIR_ENV] = mkdtempSync(join(tmpdir(), 'mpl-lock-commands-'));
  const notes: string[] = [];
  const backend = await startBackend(notes);
  globalThis.__MPL_TEST_BACKEND__ = backend;
  const topology = backend.topology ?? (await askTopology(backend.uri));
  process.env.MONGODB_URI = backend.uri;
  process.env.MPL_TEST_BACKEND = backend.kind;
  process.env.MPL_TEST_TOPOLOGY = topology;
  const why = notes.length ? ` (${notes.join('; ')})` : '';
  process.stdout.write(`\n[mongoose-pessimistic-lock] tests run against ${backend.description}, topology ${topology}${why}\n`);
}
