/** Drives the example Express app over HTTP: lock on open, save-and-unlock on submit, release on logout. */
import request from 'supertest';
import type { Types } from 'mongoose';
import { createApp, workItemModel, type WorkItemModel } from '../../examples/express-app/app';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

const db = testDatabase('express');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;
let app: ReturnType<typeof createApp>;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = workItemModel(conn.connection);
  await WorkItem.init();
  app = createApp(WorkItem, 'test-secret-test-secret');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

async function newItem(): Promise<Types.ObjectId> {
  return (await WorkItem.create({ title: 'Refund #1' }))._id;
}

test('two sessions: the second is told it is locked until the first submits', async () => {
  const alice = request.agent(app);
  const bob = request.agent(app);
  const id = (await newItem()).toHexString();

  const opened = await alice.get(`/items/${id}`).expect(200);
  expect(opened.body.item.title).toBe('Refund #1');

  const refused = await bob.get(`/items/${id}`).expect(423);
  expect(refused.body.error).toBe('LOCKED');
  expect(refused.headers['retry-after']).toMatch(/^\d+$/);
  // Bob cannot submit over Alice's lock either.
  await bob.post(`/items/${id}`).send({ title: 'bob was here' }).expect(423);

  const saved = await alice.post(`/items/${id}`).send({ title: 'Refund #1 approved' }).expect(200);
  expect(saved.body.item.title).toBe('Refund #1 approved');
  expect(await WorkItem.isLocked(id)).toBe(false);

  const bobsTurn = await bob.get(`/items/${id}`).expect(200);
  expect(bobsTurn.body.item.title).toBe('Refund #1 approved');
  await bob.post(`/items/${id}/cancel`).expect(204);
  expect(await WorkItem.isLocked(id)).toBe(false);
});

test('logout releases everything the session held', async () => {
  const carol = request.agent(app);
  const ids = await Promise.all([newItem(), newItem(), newItem()]);
  for (const id of ids) await carol.get(`/items/${id.toHexString()}`).expect(200);
  const out = await carol.post('/logout').expect(200);
  expect(out.body.released).toBe(3);
  for (const id of ids) expect(await WorkItem.isLocked(id)).toBe(false);
});

test('bad ids are a 400, invalid data keeps the lock', async () => {
  const dave = request.agent(app);
  await dave.get('/items/%7B%22%24ne%22%3Anull%7D').expect(400);
  const id = (await newItem()).toHexString();
  await dave.get(`/items/${id}`).expect(200);
  await dave.post(`/items/${id}`).send({ status: 'bogus' }).expect(400);
  expect(await WorkItem.isLocked(id)).toBe(true);
  await dave.post('/logout').expect(200);
});
