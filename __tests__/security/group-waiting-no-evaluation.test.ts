/**
 * PRODUCT.md property 11 for groups that wait (issue 17 item 2): whatever a waiting design sends
 * (keeping a prefix, reserving the document it waits for, renewing and clearing that reservation,
 * giving the prefix back after its hold bound, the ordered acquisition), an owner or label starting
 * with `$` is a plain string: the server never evaluates it. Two proofs, independent of the commands'
 * shapes or field names:
 *  - shape: every command the groups' connections send is walked, and the caller's own owner and
 *    label never appear in a position the server evaluates (pipeline updates, aggregation pipelines
 *    outside `$match`'s query language, `$expr`, `let`, projections) unless inside `$literal`. The
 *    walk needs caller values the plugin never writes itself (`$owner` is also its own field path):
 *    `$`-strings unique to the caller, for which any unwrapped occurrence is the caller's;
 *  - behaviour: two `$`-owned groups waiting for the same documents (one behind a holder that lets
 *    go late, so both wait, keep, reserve and give back) are served one after the other, each
 *    holding exactly what it believes, and never at once.
 */
import type { Types } from 'mongoose';
import { lockAll } from '../../src';
import { sleep, testDatabase } from '../support/db';
import { evaluatedCallerValues, expectServedOneAtATimeUnevaluated, recordedWaiters } from '../support/evaluated-values';
import { groupProblems, timed } from '../support/group-waiting';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(180_000);
const db = testDatabase('grp_noeval');
const cast = recordedWaiters(db, 2);
let G: WorkItemModel;
let G2: WorkItemModel;
let H: WorkItemModel;
let GOther: WorkItemModel;
let HOther: WorkItemModel;

beforeAll(async () => {
  const [gConn, g2Conn] = cast.waiters;
  G = await workItemModel(gConn!.connection, { ttl: 4_000, ownerStorage: 'plain' }, 'NoEvalWaitItem');
  G2 = await workItemModel(g2Conn!.connection, { ttl: 4_000, ownerStorage: 'plain' }, 'NoEvalWaitItem');
  H = await workItemModel(cast.holder.connection, { ttl: 30_000, ownerStorage: 'plain' }, 'NoEvalWaitItem');
  GOther = await workItemModel(gConn!.connection, { ttl: 4_000, ownerStorage: 'plain' }, 'NoEvalWaitOther');
  HOther = await workItemModel(cast.holder.connection, { ttl: 30_000, ownerStorage: 'plain' }, 'NoEvalWaitOther');
});

const owners = ['$owner', '$$NOW', '$reservedBy', '$$ROOT', '$token', '$expiresAt', '$literal', '$'];
const labels = ['$label', '$$REMOVE'];
/** Caller values the plugin never writes itself: any occurrence outside `$literal` is the caller's, evaluated. */
const unique = { owner: '$caller-owner-7f3a', other: '$$callerOwner7f3b', label: '$caller-label-7f3c' };

async function three(model: WorkItemModel = H): Promise<Types.ObjectId[]> {
  return (await model.insertMany([{ title: 'd0' }, { title: 'd1' }, { title: 'd2' }])).map((d) => d._id).sort((x, y) => x.toHexString().localeCompare(y.toHexString()));
}

// Each case waits on documents of its own, so the cases run side by side (Jest's maxConcurrency, 5
// at a time): the shape proof walks every command sent so far, and only the `unique` case's values
// are looked for.
test.concurrent.each([...owners.map((owner, i) => [owner, owners[(i + 1) % owners.length]!, labels[i % labels.length]!]), [unique.owner, unique.other, unique.label]])('groups owned by %j and %j (label %j) wait, keep, reserve and give back: served one at a time, nothing evaluated', async (owner, other, label) => {
  const ids = await three();
  const hold = await H.lock(ids[1]!, 'H');
  const windows: Array<{ who: string; from: number; to: number }> = [];
  const group = async (model: WorkItemModel, who: string, order: Types.ObjectId[]) => {
    const docs = await model.lockMany(order, who, { wait: 30_000, label });
    const from = Date.now();
    const problems = await groupProblems(model, docs, who);
    await sleep(300);
    windows.push({ who, from, to: Date.now() });
    await model.unlockMany(docs);
    return problems;
  };
  const first = timed(group(G, owner, ids));
  await sleep(400);
  const second = timed(group(G2, other, [ids[2]!, ids[1]!, ids[0]!]));
  await sleep(2_500); // both wait for d1 past a 2 s hold bound
  await hold.unlock();
  expectServedOneAtATimeUnevaluated(await Promise.all([first, second]), windows, cast.sent, [owner, other, label], unique);
});

test('across models (lockAll) with a $-owner and a $-label while waiting: nothing evaluated', async () => {
  const [item] = await three();
  const [invoice] = await three(HOther);
  const hold = await HOther.lock(invoice!, 'H');
  const call = timed(lockAll([[G, item!], [GOther, invoice!]], unique.owner, { wait: 30_000, label: unique.label }));
  await sleep(2_500);
  await hold.unlock();
  const outcome = await call;
  expect(outcome.ok).toBe(true);
  if (outcome.ok) {
    await G.releaseAllFor(unique.owner);
    await GOther.releaseAllFor(unique.owner);
  }
  expect(cast.sent.flatMap((command) => evaluatedCallerValues(command, new Set([unique.owner, unique.label])))).toEqual([]);
});

test('the walker notices an unwrapped caller value (the check can fail)', () => {
  const values = new Set(['$owner']);
  expect(evaluatedCallerValues({ update: 'x', updates: [{ q: { _id: 1, $expr: { $eq: ['$reservedBy', '$owner'] } }, u: [{ $set: { a: { $literal: '$owner' } } }] }] }, values)).toEqual(['$owner']);
  expect(evaluatedCallerValues({ aggregate: 'x', pipeline: [{ $lookup: { from: 'y', let: { o: '$owner' }, pipeline: [] } }] }, values)).toEqual(['$owner']);
  expect(evaluatedCallerValues({ find: 'x', filter: { owner: '$owner' } }, values)).toEqual([]);
});
