/**
 * A traced lock call's context names the locked document (`LockTraceContext.documentId`, set by
 * the end at the latest: docs/observability.md). The wrapper reads it from what the call returned
 * as `(result.document ?? result)._id`, meant for handles; a locked document whose schema has a
 * path named `document` (a reference to another document, say) is taken for a handle, and the
 * context names the referenced document instead (an ObjectId's `_id` is itself).
 */
import * as dc from 'node:diagnostics_channel';
import { Schema, Types } from 'mongoose';
import { lockPlugin, type LockableModel, type LockMethods, type LockTraceContext } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

interface Signature {
  document: Types.ObjectId;
  signer: string;
}
type SignatureModel = LockableModel<Signature>;

const db = testDatabase('diagdocid');
let conn: MonitoredConnection;
let Sig: SignatureModel;

beforeAll(async () => {
  conn = await connect(db.name);
  const schema = new Schema<Signature, SignatureModel, LockMethods>({ document: { type: Schema.Types.ObjectId, ref: 'Contract' }, signer: String });
  schema.plugin(lockPlugin, { ttl: 30_000 });
  Sig = conn.connection.model<Signature, SignatureModel>('Signature', schema);
  await Sig.init();
  await Sig.lockModel().init();
});
afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test('the lock channel names the locked document, also when its schema has a path named document', async () => {
  const contract = new Types.ObjectId();
  const { _id: id } = await Sig.create({ document: contract, signer: 'alice' });
  const ends: unknown[] = [];
  const channel = dc.tracingChannel<object, LockTraceContext>('mongoose-pessimistic-lock:lock');
  const noop = (): void => undefined;
  const subscribers = { start: noop, end: noop, asyncStart: noop, asyncEnd: (c: LockTraceContext) => void ends.push(c.documentId), error: noop };
  channel.subscribe(subscribers);
  try {
    const a = await Sig.lock(id, 'alice');
    await a.unlock();
    const b = await Sig.tryLock(id, 'alice');
    await b!.unlock();
  } finally {
    channel.unsubscribe(subscribers);
  }
  expect(ends.map(String)).toEqual([String(id), String(id)]);
});
