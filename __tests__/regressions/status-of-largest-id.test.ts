/**
 * An id up to MAX_ID_BYTES is accepted by every entry point (issue 16 item 7), `lockStatus`
 * included: one such id comes back in one reply on mongod.
 *
 * validateStatusIdsSize (status-arguments.ts) reserves 16 KiB for the reply's envelope and
 * 512 bytes per record on top of the ids, so one id above 16 MiB - 16.5 KiB (MAX_ID_BYTES is
 * 16 MiB - 4 KiB) is refused: "together too large ... Ask for fewer ids at a time", which one id
 * cannot do; `getLock` and `isLocked` answer for the same id. mongod always returns the first
 * document of a batch whatever its size (FindCommon::haveSpaceForNext returns true while the
 * batch is empty, src/mongo/db/query/find_common.cpp), and a reply may be up to
 * BSONObjMaxInternalSize = 16 MiB + 16 KiB (src/mongo/bson/util/builder.h), so a single record
 * of the largest accepted id fits.
 */
import { Schema } from 'mongoose';
import { MAX_ID_BYTES, lockPlugin, type LockableModel } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

const db = testDatabase('largeststatus');
let conn: MonitoredConnection;
let Strings: LockableModel<{ _id: string; title: string }>;

beforeAll(async () => {
  conn = await connect(db.name);
  const schema = new Schema<{ _id: string; title: string }>({ _id: String, title: String });
  schema.plugin(lockPlugin);
  Strings = conn.connection.model<{ _id: string; title: string }, LockableModel<{ _id: string; title: string }>>('LargestStatusItem', schema);
  await Strings.init();
  await Strings.lockModel().init();
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test('lockStatus answers for one id of MAX_ID_BYTES, as getLock does', async () => {
  const largest = 'q'.repeat(MAX_ID_BYTES - 5); // 4 (length) + UTF-8 bytes + 1 (terminator)
  await expect(Strings.getLock(largest)).resolves.toBeNull();
  await expect(Strings.lockStatus([largest])).resolves.toEqual([null]);
}, 60_000);
