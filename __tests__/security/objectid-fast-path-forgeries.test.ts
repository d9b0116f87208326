/**
 * The lock calls read a plain ObjectId argument from its bytes instead of serializing it
 * (src/arguments.ts, freshPlainObjectId; id-key.ts, plainObjectIdBytes; issue 16). That shortcut
 * must give exactly the answer of the serializing read (id-value.ts, freshId): the id the plugin
 * sends is the one the driver would have serialized the caller's value to, and a value that
 * serializes to anything else is refused with InvalidLockArgumentError before any command.
 *
 * The oracle here is js-bson itself (the driver's serializer, `mongo.BSON.serialize`), not the
 * plugin's reading of it. What js-bson reads from a value to be serialized, besides its prototype:
 *  - `toBSON` (any, own or inherited: serializeInto in js-bson src/parser/serializer.ts, 6.x and 7.x);
 *  - `_bsontype`: `value._bsontype == null` makes any object an embedded document of its own
 *    enumerable keys (both versions), so an ObjectId with an own `_bsontype: undefined` and an
 *    enumerable `$ne` is the query `{ $ne: null }`;
 *  - `Symbol.for('@@mdb.bson.version')`: another major version is refused (BSONVersionError);
 *  - 7.x: `Symbol.for('@@mdb.bson.type')` picks the serializer (`const tag = value[bsonType]`),
 *    6.x: `_bsontype` does;
 *  - then `value.serializeInto` (6.10, 7.x), which reads `this.buffer[0..11]` (6.x, the Uint8Array
 *    the `id` getter returns as is) or the packed `this.i0..i3` (7.x).
 * A Proxy can answer any of these differently from what its target would.
 *
 * Each forgery is checked against the oracle first (so the test says what it proves on the
 * js-bson version installed: Mongoose 9 ships 7.x, Mongoose 8 ships 6.x), then against the lock calls.
 */
import mongoose, { Types, mongo, type Connection } from 'mongoose';
import { InvalidLockArgumentError } from '../../src';
import { freshPlainObjectId } from '../../src/arguments';
import { idKey, sameId } from '../../src/id-key';
import { freshId, IdRefusal, type FreshId } from '../../src/id-value';
import { connect, operatorConnection, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('oidfastforge');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;
/** Reads the lock collection without being recorded as one of the plugin's commands. */
let operator: Connection;

beforeAll(async () => {
  conn = await connect(db.name);
  operator = await operatorConnection(db.name);
  WorkItem = await workItemModel(conn.connection);
  await WorkItem.create({ _id: new Types.ObjectId(HEX), title: 'named by the bytes only' });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
  await operator.close();
});

const TYPE_TAG = Symbol.for('@@mdb.bson.type');
const VERSION_TAG = Symbol.for('@@mdb.bson.version');
const HEX = '0123456789abcdef01234567';

/** What the driver's serializer makes of `value` as a field: an ObjectId's hex, another BSON type, or the error it throws. */
function serialized(value: unknown): { objectId: string } | { type: number } | { error: string } {
  let bytes: Uint8Array;
  try {
    bytes = mongo.BSON.serialize({ v: value } as mongo.Document);
  } catch (error) {
    return { error: (error as Error).message };
  }
  if (bytes[4] === 0x07) return { objectId: Buffer.from(bytes.subarray(7, 19)).toString('hex') };
  return { type: bytes[4] };
}

/** A real ObjectId of HEX with one own property added. */
const withOwn = (key: PropertyKey, value: unknown): Types.ObjectId => Object.defineProperty(new Types.ObjectId(HEX), key, { value, enumerable: typeof key === 'string' && key.startsWith('$') });

/**
 * Not a product of the ObjectId constructor: the prototype and the fields of an ObjectId of HEX
 * (whatever they are in this js-bson: `buffer`, or `i0`..`i3`), not enumerable, plus `_bsontype:
 * undefined` and an enumerable `$ne: null`. The serializer writes it as the document `{ $ne: null }`.
 */
function queryInDisguise(): Types.ObjectId {
  const real = new Types.ObjectId(HEX) as unknown as Record<PropertyKey, unknown>;
  const fields: PropertyDescriptorMap = {};
  for (const key of Reflect.ownKeys(real)) fields[key as string] = { value: real[key as string], enumerable: false };
  return Object.create(Types.ObjectId.prototype, { ...fields, _bsontype: { value: undefined }, $ne: { value: null, enumerable: true } }) as Types.ObjectId;
}

/** A Proxy of an ObjectId of HEX that answers `answers` for these keys and passes everything else through. */
function proxyAnswering(answers: Map<PropertyKey, unknown>): Types.ObjectId {
  return new Proxy(new Types.ObjectId(HEX), {
    get: (target, key) => (answers.has(key) ? answers.get(key) : Reflect.get(target, key, target)),
  });
}

const forgeries: [string, () => Types.ObjectId][] = [
  ['an ObjectId with an own `_bsontype: undefined` (an embedded document of its fields)', () => withOwn('_bsontype', undefined)],
  ['an ObjectId with an own `_bsontype: "Int32"`', () => withOwn('_bsontype', 'Int32')],
  ['an ObjectId with an own BSON type tag "Int32"', () => withOwn(TYPE_TAG, 'Int32')],
  ['an ObjectId with an own BSON type tag "Double"', () => withOwn(TYPE_TAG, 'Double')],
  ['an ObjectId with an own BSON version of another major', () => withOwn(VERSION_TAG, 5)],
  ['an ObjectId-shaped object that serializes to { $ne: null }', queryInDisguise],
  ['a Proxy of an ObjectId answering `_bsontype: undefined`', () => proxyAnswering(new Map([['_bsontype', undefined]]))],
  ['a Proxy of an ObjectId answering BSON type tag "Double" and `_bsontype: "Double"`', () => proxyAnswering(new Map<PropertyKey, unknown>([[TYPE_TAG, 'Double'], ['_bsontype', 'Double']]))],
];

/** Those of `forgeries` that this js-bson does not serialize to the ObjectId HEX (all of them on 7.x). */
const notThatObjectId = forgeries.filter(([, make]) => {
  const read = serialized(make());
  return !('objectId' in read && read.objectId === HEX);
});

test('the oracle: on this js-bson, all but the type-tag forgeries (read by 7.x only) serialize to something other than the ObjectId they carry', () => {
  const major = Number(mongoose.version.split('.')[0]);
  // js-bson 6 dispatches on `_bsontype`, 7 on the type tag: an own type tag changes nothing on 6.
  const expected = forgeries.filter(([name]) => major >= 9 || !name.startsWith('an ObjectId with an own BSON type tag')).map(([name]) => name);
  expect(notThatObjectId.map(([name]) => name)).toEqual(expected);
  expect(serialized(queryInDisguise())).toEqual({ type: 0x03 });
  expect(serialized(new Types.ObjectId(HEX))).toEqual({ objectId: HEX });
});

describe.each(notThatObjectId)('%s', (_name, make) => {
  test('the shortcut gives no answer; the serializing read refuses it', () => {
    expect(freshPlainObjectId(make())).toBeUndefined();
    expect(freshId(make(), new Set([0x07]))).toBeInstanceOf(IdRefusal);
  });

  test('Model.lock refuses it with InvalidLockArgumentError before any command, and locks nothing', async () => {
    conn.resetCommands();
    const error = await WorkItem.lock(make(), 'mallory').then(
      (doc) => doc.unlock().then(() => undefined),
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InvalidLockArgumentError);
    expect((error as InvalidLockArgumentError).argument).toBe('id');
    expect(conn.commands).toEqual([]);
    const record = await operator.db!.collection(WorkItem.lockModel().collection.collectionName).findOne({ _id: new Types.ObjectId(HEX) } as never);
    expect(record).toBeNull();
  });

  test.each([
    ['lockMany', () => WorkItem.lockMany([make()], 'mallory')],
    ['isLocked', () => WorkItem.isLocked(make())],
    ['lockStatus', () => WorkItem.lockStatus([make()])],
    ['unlock', () => WorkItem.unlock(make(), 'mallory')],
  ] as [string, () => Promise<unknown>][])('%s refuses it with InvalidLockArgumentError before any command', async (_call, call) => {
    conn.resetCommands();
    const error = await call().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InvalidLockArgumentError);
    expect(conn.commands).toEqual([]);
  });
});

/**
 * js-bson 6 keeps an ObjectId's bytes in an own Uint8Array (`buffer`) and its `id` getter returns
 * that very array; js-bson 7 packs them in four numbers and `id` builds a new Buffer on each read.
 * On 6.x the array is the caller's: what the shortcut copies must be what `serializeInto` writes,
 * `this.buffer[0]` to `this.buffer[11]`, read by index.
 */
function ownByteArray(id: Types.ObjectId): Uint8Array | undefined {
  const fields = id as unknown as Record<string, unknown>;
  const key = Reflect.ownKeys(id).find((k) => typeof k === 'string' && fields[k] instanceof Uint8Array) as string | undefined;
  return key === undefined ? undefined : (fields[key] as Uint8Array);
}

const keepsOwnBytes = ownByteArray(new Types.ObjectId()) !== undefined;
if (!keepsOwnBytes) process.stdout.write('[skipped on js-bson 7] its ObjectId keeps no Uint8Array of its own (the `id` getter allocates), so there is nothing of the caller\'s to tamper with\n');
const withOwnBytes = keepsOwnBytes ? test : test.skip;

describe("an ObjectId whose own byte array answers otherwise than by its elements (js-bson 6)", () => {
  /** An ObjectId of HEX whose byte array has a `valueOf` that names other bytes. */
  function valueOfElsewhere(): Types.ObjectId {
    const id = new Types.ObjectId(HEX);
    (ownByteArray(id) as unknown as { valueOf(): string }).valueOf = () => 'hello world!';
    return id;
  }
  /** An ObjectId whose byte array is 20 bytes long, the first 12 HEX's, with an own `length` of 12. */
  function longerThanItSays(): Types.ObjectId {
    const id = new Types.ObjectId(HEX);
    const long = new Uint8Array(20).fill(0xee);
    long.set(Buffer.from(HEX, 'hex'));
    Object.defineProperty(long, 'length', { value: 12 });
    const fields = id as unknown as Record<string, unknown>;
    const key = Reflect.ownKeys(id).find((k) => typeof k === 'string' && fields[k] instanceof Uint8Array) as string;
    fields[key] = long;
    return id;
  }

  withOwnBytes.each([
    ['a `valueOf` naming other bytes', valueOfElsewhere],
    ['an own `length` shorter than its elements', longerThanItSays],
  ] as [string, () => Types.ObjectId][])('%s: the shortcut reads the bytes the serializer writes', (_name, make) => {
    expect(serialized(make())).toEqual({ objectId: HEX });
    const fast = freshPlainObjectId(make());
    const slow = freshId(make(), new Set([0x07])) as FreshId;
    expect((slow.value as mongo.ObjectId).toHexString()).toBe(HEX);
    // No answer (the serializing read judges it), or the same one.
    if (fast !== undefined) expect((fast.value as mongo.ObjectId).toHexString()).toBe(HEX);
    // idKey and sameId key it by those bytes too.
    expect(idKey(make())).toBe(idKey(new Types.ObjectId(HEX)));
    expect(sameId(make(), new Types.ObjectId(HEX))).toBe(true);
    expect(sameId(new Types.ObjectId(HEX), make())).toBe(true);
  });

  withOwnBytes('Model.lock of an ObjectId whose byte array has such a `valueOf` locks the document the driver names, not the other one', async () => {
    const named = await WorkItem.create({ title: 'named' });
    const other = await WorkItem.create({ _id: new Types.ObjectId(Buffer.from('hello world!')), title: 'elsewhere' });
    const id = new Types.ObjectId(named._id.toHexString());
    (ownByteArray(id) as unknown as { valueOf(): string }).valueOf = () => 'hello world!';
    expect((await WorkItem.findById(id).orFail()).title).toBe('named'); // what the driver names
    const locked = await WorkItem.lock(id, 'alice');
    expect({ title: locked.title, named: await WorkItem.isLocked(named._id), other: await WorkItem.isLocked(other._id) }).toEqual({ title: 'named', named: true, other: false });
    await locked.unlock();
  });

  withOwnBytes('Model.lock of an ObjectId whose byte array says it is shorter than it is: the id as serialized, not a RangeError', async () => {
    const named = await WorkItem.create({ _id: new Types.ObjectId(HEX.replace(/^01/, '02')), title: 'longer array' });
    const id = new Types.ObjectId(named._id.toHexString());
    const long = new Uint8Array(20).fill(0xee);
    long.set(Buffer.from(named._id.toHexString(), 'hex'));
    Object.defineProperty(long, 'length', { value: 12 });
    const fields = id as unknown as Record<string, unknown>;
    fields[Reflect.ownKeys(id).find((k) => typeof k === 'string' && fields[k] instanceof Uint8Array) as string] = long;
    const locked = await WorkItem.lock(id, 'alice');
    expect(locked.title).toBe('longer array');
    await locked.unlock();
  });
});

/**
 * sameId (plugin.ts, loadLocked: the loaded `_id` must be the locked one) must agree with idKey
 * equality for every pair, and idKey must key a value that serializes as an ObjectId by the bytes
 * the serializer writes, whichever path reads it.
 */
test('sameId agrees with idKey on every pair of ids, forgeries included; an id serializing as an ObjectId is keyed by the bytes js-bson writes', () => {
  class Sub extends mongo.ObjectId {}
  const values: unknown[] = [
    new Types.ObjectId(HEX),
    new mongo.ObjectId(HEX),
    new Types.ObjectId(),
    new Sub(HEX),
    new Proxy(new Types.ObjectId(HEX), {}),
    Object.assign(new Types.ObjectId(), { toBSON: () => new Types.ObjectId(HEX) }),
    Object.freeze(new Types.ObjectId(HEX)),
    HEX,
    new mongo.Binary(Buffer.from(HEX, 'hex')),
    1,
    new mongo.Double(1),
    mongo.Long.fromNumber(1),
    mongo.Decimal128.fromString('1.0'),
    { a: new Types.ObjectId(HEX) },
    ...forgeries.map(([, make]) => make()),
  ];
  const disagreements: string[] = [];
  values.forEach((a, i) =>
    values.forEach((b, j) => {
      const keyed = (() => {
        try {
          return idKey(a) === idKey(b);
        } catch {
          return 'throws';
        }
      })();
      const same = (() => {
        try {
          return sameId(a, b);
        } catch {
          return 'throws';
        }
      })();
      if (keyed !== same) disagreements.push(`${i} and ${j}: sameId ${same}, idKey ${keyed}`);
    }),
  );
  expect(disagreements).toEqual([]);
  for (const value of values) {
    const read = serialized(value);
    if ('objectId' in read) expect(idKey(value)).toBe(`o:${read.objectId}`);
    // Sent as another BSON type (an embedded document, an int32, ...): never the ObjectId's key.
    if ('type' in read) expect(idKey(value)).not.toBe(idKey(new Types.ObjectId(HEX)));
  }
});
