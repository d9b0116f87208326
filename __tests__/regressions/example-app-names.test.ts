/**
 * Attack: the example back office (examples/express-app). Sign-in accepts any name of 1..100
 * characters without Unicode control characters (`/\p{Cc}/u`) and makes it the label of every lock
 * the user takes; the plugin's label rule is stricter (no line/paragraph separators, no
 * bidirectional overrides or isolates, no lone surrogates). A user who signs in as, say,
 * "Alice\u202E" (or with U+2028) is let in and then can never open any item: every edit page is a
 * 400 "Invalid lock option label" error page. Sign-in should refuse such a name with the friendly
 * message (or the app should take the lock without it), not accept it and break every edit.
 */
import request from 'supertest';
import { createApp, workItemModel, type WorkItemModel } from '../../examples/express-app/app';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

const db = testDatabase('atk_exnames');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;
let app: ReturnType<typeof createApp>;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = workItemModel(conn.connection);
  await WorkItem.init();
  app = createApp({ WorkItem, sessionSecret: 'test-secret-test-secret' });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test.each([
  ['a right-to-left override', 'Alice\u202Eecila'],
  ['a line separator', 'Alice\u2028Bob'],
  ['a first-strong isolate', 'Alice\u2068'],
])('a name with %s is either refused at sign-in or can edit items', async (_what, name) => {
  const { _id: id } = await WorkItem.create({ title: 'Refund #9', status: 'pending' });
  const agent = request.agent(app);
  const login = await agent.post('/login').type('form').send({ name });
  if (login.status === 400) return; // refused with the sign-in page's message: fine
  expect(login.status).toBe(303);
  const edit = await agent.get(`/items/${id.toHexString()}/edit`);
  expect(edit.status).toBe(200);
});
