/**
 * Attack: PRODUCT.md property 5 ("a holder whose lock expired and was taken by someone else cannot
 * write: its save fails ... instead of overwriting the new holder's work") and README, Limits:
 * "Plain save() ... check the lock and then write, in two commands. If the lock expires in the
 * moment between them (one round trip) ...".
 *
 * The check is a pre('save') hook installed by `schema.plugin(lockPlugin)`. Every pre('save') hook
 * the application registers after that call (the README's order: fields, plugin, then the rest of
 * the schema) runs between the check and the write. A hook that awaits anything (hashing, an HTTP
 * call, a lookup) stretches the "one round trip" to its own duration, during which the lock can
 * expire, be taken over and be written by its new holder, whose work the stale save then overwrites.
 * On a replica set too: only saveAndUnlock() is transactional, plain save() is not.
 */
import { Schema } from 'mongoose';
import { LockNotHeldError, lockPlugin, type LockableModel } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';

const db = testDatabase('atk_savehook');
let conn: MonitoredConnection;

interface Item {
  title: string;
}

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test("a stale holder's save() is refused even when an application pre('save') hook (registered after the plugin) is slow", async () => {
  const schema = new Schema<Item>({ title: { type: String, required: true } });
  schema.plugin(lockPlugin, { ttl: 1_000 });
  // An ordinary application hook, registered after the plugin. Slow only for the first holder.
  schema.pre('save', async function slowHook() {
    if (this.$locals.slow === true) await sleep(1_600);
  });
  const M = conn.connection.model<Item, LockableModel<Item>>('SaveHookWindow', schema);
  await M.init();
  await M.lockModel().init();

  const { _id: id } = await M.create({ title: 'original' });
  const alice = await M.lock(id, 'alice');
  alice.title = "Alice's stale edit";
  alice.$locals.slow = true;
  const aliceSave = alice.save().then(
    () => 'saved',
    (error: unknown) => error,
  );

  await sleep(1_200); // Alice's lock expired (ttl 1 s) while her save is inside the hook
  const bob = await M.lock(id, 'bob', { ttl: 30_000 });
  bob.title = "Bob's work";
  await bob.save();

  const outcome = await aliceSave;
  const stored = await M.collection.findOne({ _id: id });
  expect(stored!.title).toBe("Bob's work");
  expect(outcome).toBeInstanceOf(LockNotHeldError);
}, 20_000);
