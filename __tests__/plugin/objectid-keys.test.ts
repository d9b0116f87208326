/**
 * An ObjectId `_id` is keyed by its 12 bytes (src/id-key.ts, objectIdHex), without serializing it:
 * two ids still get one key exactly when mongod sees one `_id` (BSON type 7 and the same bytes),
 * as with the BSON encoding every other type is keyed by. Pinned here: equal bytes from separate
 * instances are one id; the same bytes as another BSON type (the hex string, a Binary of the 12
 * bytes) and other bytes are not; an ObjectId whose serialization the application changed
 * (its own `toBSON`) is keyed by what it serializes to, as before.
 */
import { mongo, Types } from 'mongoose';
import { idKey } from '../../src/id-key';

test('ObjectIds with the same bytes share a key; other types or bytes never do', () => {
  const id = new Types.ObjectId();
  const same = new mongo.ObjectId(id.toHexString());
  expect(idKey(same)).toBe(idKey(id));
  const other = new Types.ObjectId();
  expect(idKey(other)).not.toBe(idKey(id));
  expect(idKey(id.toHexString())).not.toBe(idKey(id));
  expect(idKey(new mongo.Binary(Buffer.from(id.id)))).not.toBe(idKey(id));
  expect(idKey({ a: id })).toBe(idKey({ a: same }));
  expect(idKey({ a: id })).not.toBe(idKey({ a: other }));
  expect(idKey([id])).toBe(idKey([same]));
});

test('an ObjectId that serializes as something else is keyed by what it serializes to', () => {
  const id = new Types.ObjectId();
  const disguised = Object.assign(new Types.ObjectId(id.toHexString()), { toBSON: () => 'plain string' });
  expect(idKey(disguised)).toBe(idKey('plain string'));
  expect(idKey(disguised)).not.toBe(idKey(id));
  class Sub extends mongo.ObjectId {}
  expect(idKey(new Sub(id.toHexString()))).toBe(idKey(id)); // a subclass: serialized, the same bytes
  expect(idKey(Object.assign(new Types.ObjectId(), { toBSON: () => id }))).toBe(idKey(id)); // serializes as id
});
