/**
 * `listLocks` pages through every lock, whatever the length of the ids (README, "Statics":
 * `next` is "the cursor of the next page"; an id may be up to MAX_ID_BYTES).
 *
 * A cursor is `c1.` + base64url of the id's canonical EJSON (status-arguments.ts cursorAfter),
 * so it is about 4/3 of the id's length; readCursor refuses any cursor longer than
 * MAX_CURSOR_LENGTH = 512 characters. With string ids of a few hundred characters (a URL, a path,
 * a composite key) the plugin's own `next` is refused on the next call: "this is not a cursor
 * from listLocks()", and the listing cannot go past its first page.
 */
import { Schema } from 'mongoose';
import { lockPlugin, type LockableModel } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

interface Page {
  _id: string;
  title: string;
}

const db = testDatabase('longcursor');
let conn: MonitoredConnection;
let Pages: LockableModel<Page>;

beforeAll(async () => {
  conn = await connect(db.name);
  const schema = new Schema<Page>({ _id: String, title: String });
  schema.plugin(lockPlugin);
  Pages = conn.connection.model<Page, LockableModel<Page>>('LongIdPage', schema);
  await Pages.init();
  await Pages.lockModel().init();
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test.each([100, 400, 2_000])('three locks on ids of %i characters are listed one page at a time', async (length) => {
  const ids = ['a', 'b', 'c'].map((c) => `https://example.com/${c.repeat(length - 20)}`);
  for (const id of ids) {
    await Pages.create({ _id: id, title: 't' });
    await Pages.lock(id, `owner-${length}`);
  }
  const listed: unknown[] = [];
  let after: string | undefined;
  for (let page = 0; page < 10; page++) {
    const { locks, next } = await Pages.listLocks({ owner: `owner-${length}`, limit: 1, ...(after === undefined ? {} : { after }) });
    listed.push(...locks.map((lock) => lock.documentId));
    if (next === null) break;
    after = next;
  }
  expect(listed).toEqual(ids);
  await Pages.releaseAllFor(`owner-${length}`);
});
