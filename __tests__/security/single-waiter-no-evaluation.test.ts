/**
 * PRODUCT.md property 11 for single-document callers that WAIT (attack-fair4 brief: "no caller value
 * evaluated by the server (owners/labels starting with `$` in the new commands)"). A design where a
 * waiting `lock` / `withLock` / `acquireLock` reserves the document it waits for (the oldest waiter
 * keeping the reservation, its age written with the reservation) sends new commands: reserve, take
 * over an older or younger reservation, renew, clear. Whatever they are, an owner or label starting
 * with `$` stays a plain string. Two proofs, as security/group-waiting-no-evaluation:
 *  - shape: every command the waiters' connections send is walked (support/evaluated-values.ts), and
 *    the caller's own values, `$`-strings the plugin never writes itself, never appear where the
 *    server evaluates them outside `$literal`;
 *  - behaviour: `$`-owned waiters (owners named like the record's fields and system variables) line
 *    up behind a holder for longer than the 250 ms before reserving, are served one at a time, each
 *    holding on the server exactly what it believes, with its label stored as given.
 */
import type { Types } from 'mongoose';
import { sleep, testDatabase } from '../support/db';
import { expectServedOneAtATimeUnevaluated, recordedWaiters } from '../support/evaluated-values';
import { groupProblems, timed } from '../support/group-waiting';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(180_000);
const db = testDatabase('single_noeval');
const cast = recordedWaiters(db, 2);
let A: WorkItemModel;
let B: WorkItemModel;
let H: WorkItemModel;

beforeAll(async () => {
  A = await workItemModel(cast.waiters[0]!.connection, { ttl: 10_000, ownerStorage: 'plain' }, 'NoEvalSingleItem');
  B = await workItemModel(cast.waiters[1]!.connection, { ttl: 10_000, ownerStorage: 'plain' }, 'NoEvalSingleItem');
  H = await workItemModel(cast.holder.connection, { ttl: 30_000, ownerStorage: 'plain' }, 'NoEvalSingleItem');
});

const unique = { owner: '$caller-owner-8e1a', other: '$$callerOwner8e1b', label: '$caller-label-8e1c' };
const pairs: Array<[string, string, string]> = [
  ['$reservedBy', '$reservedUntil', '$label'],
  ['$reservedSince', '$$NOW', '$$REMOVE'],
  ['$owner', '$expiresAt', '$reservedSince'],
  ['$$ROOT', '$', '$$CURRENT.owner'],
  [unique.owner, unique.other, unique.label],
];

type Form = 'lock' | 'withLock' | 'acquireLock';

/** One waiting call of `form`: resolves, once served, to the problems found on the server, after 300 ms held. */
async function waiter(model: WorkItemModel, form: Form, id: Types.ObjectId, owner: string, label: string, windows: Array<{ from: number; to: number }>): Promise<string[]> {
  const check = async (doc: Parameters<typeof groupProblems>[1][number]) => {
    const from = Date.now();
    const problems = await groupProblems(model, [doc], owner);
    const record = await model.lockModel().collection.findOne({ _id: id as never });
    if (record?.label !== label) problems.push(`label stored as ${String(record?.label)}`);
    await sleep(300);
    windows.push({ from, to: Date.now() });
    return problems;
  };
  if (form === 'lock') {
    const doc = await model.lock(id, owner, { wait: 30_000, label });
    const problems = await check(doc);
    await doc.unlock();
    return problems;
  }
  if (form === 'withLock') return model.withLock(id, owner, (doc) => check(doc), { wait: 30_000, label });
  const handle = await model.acquireLock(id, owner, { wait: 30_000, label });
  const problems = await check(handle.document);
  await handle.release();
  return problems;
}

// Each case waits on a document of its own, so the cases run side by side (Jest's maxConcurrency,
// 5 at a time): the shape proof walks every command sent so far, and only the `unique` case's
// values are looked for.
test.concurrent.each(pairs.flatMap(([owner, other, label]) => (['lock', 'withLock', 'acquireLock'] as const).map((form) => [form, owner, other, label] as const)))(
  '%s: waiters owned by %j and %j (label %j) line up, are served one at a time, nothing evaluated',
  async (form, owner, other, label) => {
    const [d] = (await H.insertMany([{ title: 'd' }])).map((x) => x._id);
    const hold = await H.lock(d!, 'H');
    const windows: Array<{ from: number; to: number }> = [];
    const first = timed(waiter(A, form, d!, owner, label, windows));
    await sleep(600);
    const second = timed(waiter(B, form, d!, other, label, windows));
    await sleep(1_500); // both refused for longer than 250 ms: a design that reserves has reserved
    await hold.unlock();
    expectServedOneAtATimeUnevaluated(await Promise.all([first, second]), windows, cast.sent, [owner, other, label], unique);
  },
);
