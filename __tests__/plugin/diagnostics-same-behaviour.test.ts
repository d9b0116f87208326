/**
 * A traced call behaves the same with and without subscribers (docs/observability.md: nothing is
 * built while nobody subscribes, and a subscriber changes nothing): the same error class, settled
 * the same way (a rejected promise, not a synchronous throw), the caller's options read the same
 * number of times.
 */
import * as dc from 'node:diagnostics_channel';
import type { Types } from 'mongoose';
import type { LockTraceContext } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('diagsame');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection, { ttl: 30_000 });
});
afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const newItem = async (): Promise<Types.ObjectId> => (await WorkItem.create({ title: 'same' }))._id;

/** How a call settled: 'throw' (synchronously), 'reject' or 'resolve', with the error's class name. */
async function outcome(call: () => unknown): Promise<string> {
  let returned: unknown;
  try {
    returned = call();
  } catch (error) {
    return `throw ${(error as Error).constructor.name}`;
  }
  try {
    await returned;
    return 'resolve';
  } catch (error) {
    return `reject ${(error as Error).constructor.name}`;
  }
}

async function observed<T>(run: () => Promise<T>): Promise<T> {
  const channel = dc.tracingChannel<object, LockTraceContext>('mongoose-pessimistic-lock:lock');
  const noop = (): void => undefined;
  const subscribers = { start: noop, end: noop, asyncStart: noop, asyncEnd: noop, error: noop };
  channel.subscribe(subscribers);
  try {
    return await run();
  } finally {
    channel.unsubscribe(subscribers);
  }
}

test('options whose label getter throws: the same outcome with and without a subscriber', async () => {
  const id = await newItem();
  const options = (): object =>
    Object.defineProperty({}, 'label', {
      enumerable: true,
      get() {
        throw new RangeError('label getter');
      },
    });
  const plain = await outcome(() => WorkItem.lock(id, 'alice', options() as never));
  const traced = await observed(() => outcome(() => WorkItem.lock(id, 'alice', options() as never)));
  expect(traced).toBe(plain);
});

test("the caller's options are read as often with a subscriber as without", async () => {
  const id = await newItem();
  let reads = 0;
  const options = (): object =>
    Object.defineProperty({}, 'label', {
      enumerable: true,
      get() {
        reads++;
        return 'Alice';
      },
    });
  reads = 0;
  await (await WorkItem.lock(id, 'alice', options() as never)).unlock();
  const plain = reads;
  reads = 0;
  await observed(async () => (await WorkItem.lock(id, 'alice', options() as never)).unlock());
  expect(reads).toBe(plain);
});

test('a static called without its model: the same outcome with and without a subscriber', async () => {
  const id = await newItem();
  const { lock } = WorkItem;
  const plain = await outcome(() => (lock as (id: unknown, owner: string) => Promise<unknown>)(id, 'alice'));
  const traced = await observed(() => outcome(() => (lock as (id: unknown, owner: string) => Promise<unknown>)(id, 'alice')));
  expect(traced).toBe(plain);
});
