/**
 * `npm run demo`: the design card's story, end to end, on an embedded MongoDB (a real mongod
 * when one is available, the project's emulator otherwise). Exits 0 and cleans up after itself.
 * README.md tells the same story ("The story"); __tests__/docs/readme.test.ts keeps the two in step.
 */
import mongoose, { Schema } from 'mongoose';
import { LockNotHeldError, LockedError, lockPlugin, type LockableModel, type LockMethods } from '../src';
import { startBackend } from '../test-backend/backend';

interface WorkItem {
  title: string;
  notes: string[];
}

const say = (who: string, text: string) => console.log(`${who.padEnd(8)} ${text}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  const notes: string[] = [];
  const backend = await startBackend(notes);
  console.log(`MongoDB: ${backend.description}${notes.length ? ` (${notes.join('; ')})` : ''}\n`);
  const connection = mongoose.createConnection(backend.uri, { dbName: `mpl_demo_${process.pid}` });
  try {
    await connection.asPromise();
    const WorkItemSchema = new Schema<WorkItem, LockableModel<WorkItem>, LockMethods>({ title: String, notes: [String] });
    WorkItemSchema.plugin(lockPlugin, { ttl: 30_000 });
    const WorkItem = connection.model<WorkItem, LockableModel<WorkItem>>('WorkItem', WorkItemSchema);
    await WorkItem.init();

    const { _id: id } = await WorkItem.create({ title: 'Refund request #4711', notes: [] });
    say('setup', `created work item ${id.toHexString()} "Refund request #4711"`);

    console.log('\n1. Two back-office users open the same work item');
    const alicesCopy = await WorkItem.lock(id, 'alice-session');
    say('alice', `opened it and holds the lock until ${alicesCopy.heldLock()!.expiresAt.toISOString()}`);
    try {
      await WorkItem.lock(id, 'bob-session');
      throw new Error('bob should have been refused');
    } catch (error) {
      if (!(error instanceof LockedError)) throw error;
      say('bob', `is told: ${error.message}`);
    }

    console.log('\n2. Alice edits and saves; the lock is released with the save');
    alicesCopy.notes.push('alice: customer called, refund approved');
    await alicesCopy.saveAndUnlock();
    say('alice', 'saved her note with saveAndUnlock()');
    const bobsCopy = await WorkItem.lock(id, 'bob-session');
    say('bob', `now gets the lock and sees: ${JSON.stringify(bobsCopy.notes)}`);
    bobsCopy.notes.push('bob: refund sent');
    await bobsCopy.saveAndUnlock();
    say('bob', 'saved and released');

    console.log('\n3. A session crashes while holding the lock; the lock expires after its ttl');
    const carolsCopy = await WorkItem.lock(id, 'carol-session', { ttl: 1_500 });
    say('carol', 'locked it with a 1.5 s ttl ... and her browser crashed');
    await WorkItem.lock(id, 'dave-session').catch((error: unknown) => {
      if (!(error instanceof LockedError)) throw error;
      say('dave', 'is refused while the crashed lock is still valid');
    });
    await sleep(1_600);
    const davesCopy = await WorkItem.lock(id, 'dave-session');
    say('dave', 'took the lock over right after it expired (by the server clock, not the TTL monitor)');
    davesCopy.notes.push('dave: closed');
    await davesCopy.save();
    carolsCopy.notes.push('carol: stale edit');
    await carolsCopy.save().catch((error: unknown) => {
      if (!(error instanceof LockNotHeldError)) throw error;
      say('carol', `comes back and tries to save: ${error.message}`);
    });
    await davesCopy.unlock();
    say('result', `stored notes: ${JSON.stringify((await WorkItem.findById(id).orFail()).notes)}`);

    console.log('\n4. A session ends: everything it held is released in one call');
    const others = await WorkItem.create([{ title: 'Invoice #1' }, { title: 'Invoice #2' }, { title: 'Invoice #3' }]);
    for (const doc of others) await WorkItem.lock(doc._id, 'erin-session');
    say('erin', `holds ${others.length} locks and logs out`);
    const released = await WorkItem.releaseAllFor('erin-session');
    say('logout', `releaseAllFor('erin-session') released ${released} locks`);
    const stillLocked = await Promise.all(others.map((doc) => WorkItem.isLocked(doc._id)));
    say('check', `any of them still locked? ${stillLocked.some(Boolean)}`);

    console.log('\n5. A web form: the edit page and the submit are two requests, joined by a lock ticket');
    const form = await WorkItem.lock(id, 'frank-session', { ttl: 1_500, label: 'Frank' });
    const ticket = form.heldLock()!.ticket;
    say('frank', `opened the edit page; the form carries the lock ticket ${ticket.slice(0, 12)}... (no owner in it)`);
    say('grace', `sees on the list: ${JSON.stringify((await WorkItem.lockStatus([id]))[0]?.label)} is editing it`);
    await sleep(1_600);
    const gracesCopy = await WorkItem.lock(id, 'grace-session', { label: 'Grace' });
    say('grace', "Frank's lock expired; she takes the item and saves 'refund SENT'");
    gracesCopy.notes.push('grace: refund SENT');
    await gracesCopy.saveAndUnlock();
    await WorkItem.lock(id, 'frank-session', { resume: ticket }).catch((error: unknown) => {
      if (!(error instanceof LockNotHeldError)) throw error;
      say('frank', `submits his stale form and is refused (${error.reason}): nothing of Grace's is lost`);
    });
    say('result', `stored notes: ${JSON.stringify((await WorkItem.findById(id).orFail()).notes)}`);

    console.log('\nDone.');
  } finally {
    await connection.dropDatabase().catch(() => undefined);
    await connection.close();
    await backend.stop();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
