/**
 * An ObjectId `_id` is keyed by its 12 bytes (src/id-key.ts, objectIdHex), without serializing it:
 * two ids still get one key exactly when mongod sees one `_id` (BSON type 7 and the same bytes),
 * as with the BSON encoding every other type is keyed by. Pinned here: equal bytes from separate
 * instances are one id; the same bytes as another BSON type (the hex string, a Binary of the 12
 * bytes) and other bytes are not; an ObjectId whose serialization the application changed
 * (its own `toBSON`) is keyed by what it serializes to, as before.
 */
import { mongo, Types } from 'mongoose';
import { freshPlainObjectId } from '../../src/arguments';
import { idKey, sameId } from '../../src/id-key';
import { freshId, IdRefusal, type FreshId } from '../../src/id-value';

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

/**
 * The lock calls read a plain ObjectId argument without serializing it (src/arguments.ts,
 * freshPlainObjectId; issue 16, Performance): the answer must be freshId's for every plain
 * ObjectId, and none at all (so the serializing path judges it) for anything else.
 */
describe('a plain ObjectId argument is read without serializing it, with the same answer', () => {
  const OBJECT_ID = new Set([7]);
  const bytesOf = (value: unknown) => Buffer.from((value as mongo.ObjectId).id).toString('hex');

  test('for plain ObjectIds: a fresh ObjectId of the same bytes, type and size as the serialized read', () => {
    const samples = [new Types.ObjectId(), new mongo.ObjectId('000000000000000000000000'), new mongo.ObjectId('ffffffffffffffffffffffff'), mongo.ObjectId.createFromTime(1)];
    for (const id of samples) {
      const fast = freshPlainObjectId(id)!;
      const slow = freshId(id, OBJECT_ID);
      expect(slow).not.toBeInstanceOf(IdRefusal);
      const { value, type, bytes } = slow as FreshId;
      expect({ type: fast.type, bytes: fast.bytes, hex: bytesOf(fast.value) }).toEqual({ type, bytes, hex: bytesOf(value) });
      expect(fast.value).not.toBe(id); // a copy: changing the caller's object later changes nothing sent
      expect(Object.getPrototypeOf(fast.value)).toBe(mongo.ObjectId.prototype);
    }
  });

  test('the copy does not share the caller\'s bytes', () => {
    const id = new Types.ObjectId('0123456789abcdef01234567');
    const fast = freshPlainObjectId(id)!;
    const raw = id.id as Uint8Array;
    raw[0] = 0xee;
    expect(bytesOf(fast.value)).toBe('0123456789abcdef01234567');
  });

  test('anything that is not a plain ObjectId is left to the serializing read', () => {
    const id = new Types.ObjectId();
    class Sub extends mongo.ObjectId {}
    const forged = Object.assign(Object.create(Types.ObjectId.prototype) as object, { toBSON: () => ({ $ne: null }) });
    const values: unknown[] = [
      id.toHexString(),
      new mongo.Binary(Buffer.from(id.id)),
      new Sub(id.toHexString()),
      forged,
      Object.assign(new Types.ObjectId(), { toBSON: () => 'x' }),
      Object.defineProperty(new Types.ObjectId(), 'id', { value: new Uint8Array(12) }),
      Object.defineProperty(new Types.ObjectId(), 'serializeInto', { value: () => 0 }),
      { _bsontype: 'ObjectId', id: new Uint8Array(12) },
      null,
      undefined,
      12,
    ];
    for (const value of values) expect(freshPlainObjectId(value)).toBeUndefined();
  });

  test('sameId agrees with idKey equality', () => {
    const id = new Types.ObjectId();
    const values: unknown[] = [id, new mongo.ObjectId(id.toHexString()), new Types.ObjectId(), id.toHexString(), Object.assign(new Types.ObjectId(), { toBSON: () => id }), 1, 1.0, new mongo.Long(1)];
    for (const a of values) for (const b of values) expect(sameId(a, b)).toBe(idKey(a) === idKey(b));
  });
});
