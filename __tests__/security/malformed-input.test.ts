/**
 * Security and bad input (issue 5, PRODUCT.md property 7): every public function, fed malformed
 * owners, ids, ttls and options, throws the exact typed error with its code, and command
 * monitoring proves that no command reached the server.
 *
 * __tests__/plugin/bad-input.test.ts already covers Model.lock (owners, ids, ttl),
 * Model.releaseAllFor (owners), isLocked/getLock/forceUnlock (ids), and options.test.ts most
 * plugin options; this file covers everything else: tryLock, acquireLock, withLock, per-call
 * options (wait, signal, autoExtend, unknown ones), doc.extendLock, runWithLockOwner,
 * lockOwnerMiddleware, the query options lockOwner / skipLockCheck (query writes and bulkWrite),
 * doc.deleteOne inside a bad owner context, and the plugin options the other files leave out.
 * The web story (issue 11) adds: Model.unlock, Model.lockStatus, Model.listLocks, lock tickets
 * (`resume`, unlock's `ticket`) and labels.
 */
import { Schema, Types, mongo } from 'mongoose';
import {
  InvalidLockArgumentError,
  InvalidLockOptionError,
  LockError,
  lockAll,
  lockOwnerMiddleware,
  lockPlugin,
  runWithLockOwner,
  type LockPluginOptions,
} from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('security');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;
let realId: Types.ObjectId;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection, { ttl: 10_000 });
  realId = (await WorkItem.create({ title: 'target' }))._id;
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

type ErrorClass = typeof InvalidLockArgumentError | typeof InvalidLockOptionError;
interface Case {
  call: () => unknown;
  errorClass: ErrorClass;
  code: 'INVALID_ARGUMENT' | 'INVALID_OPTION';
  /** The `argument` or `option` the error names. */
  names: string;
}

/** Runs `call` (sync or async), expecting exactly `errorClass`/`code` and not one command sent. */
async function expectRefused({ call, errorClass, code, names }: Case): Promise<void> {
  conn.resetCommands();
  let error: unknown;
  try {
    await call();
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(errorClass);
  expect((error as Error).constructor).toBe(errorClass);
  expect((error as LockError).code).toBe(code);
  expect(errorClass === InvalidLockArgumentError ? (error as InvalidLockArgumentError).argument : (error as InvalidLockOptionError).option).toBe(names);
  expect(conn.commands).toEqual([]);
}

const badOwners: [string, unknown][] = [
  ['a query object { $ne: null }', { $ne: null }],
  ['a $regex operator', { $regex: '.*' }],
  ['an array', ['session']],
  ['a number', 42],
  ['NaN', NaN],
  ['null', null],
  ['undefined', undefined],
  ['an empty string', ''],
  ['a huge string (513 chars)', 'x'.repeat(513)],
  ['a huge string (1 MB)', 'x'.repeat(1_000_000)],
  ['a boolean', false],
  ['a Symbol', Symbol('owner')],
  ['an ObjectId', new Types.ObjectId()],
];

const badIds: [string, unknown][] = [
  ['a query object { $ne: null }', { $ne: null }],
  ['a $where operator', { $where: 'true' }],
  ['a $in operator', { $in: [new Types.ObjectId()] }],
  ['an empty object', {}],
  ['an array', [new Types.ObjectId()]],
  ['null', null],
  ['undefined', undefined],
  ['a malformed ObjectId string', 'not-an-object-id'],
  ['an empty string', ''],
  ['Infinity', Infinity],
  ['a document-like object', { _id: new Types.ObjectId() }],
];

const badTtls: [string, unknown][] = [
  ['NaN', NaN],
  ['negative', -1],
  ['-Infinity', -Infinity],
  ['Infinity', Infinity],
  ['a numeric string', '1000'],
  ['fractional', 10.5],
  ['above one year', 366 * 24 * 3600_000],
  ['an object', { $gt: 0 }],
  ['null', null],
];

const noop = async () => 'never runs';

/** The acquiring statics, each called with (id, owner, options). */
const acquirers: [string, (id: unknown, owner: unknown, options?: unknown) => Promise<unknown>][] = [
  ['Model.tryLock', (id, owner, options) => WorkItem.tryLock(id as Types.ObjectId, owner as string, options as never)],
  ['Model.acquireLock', (id, owner, options) => WorkItem.acquireLock(id as Types.ObjectId, owner as string, options as never)],
  ['Model.withLock', (id, owner, options) => WorkItem.withLock(id as Types.ObjectId, owner as string, noop, options as never)],
];

describe.each(acquirers)('%s', (_name, acquire) => {
  test.each(badOwners)('refuses the owner %s', (_label, owner) =>
    expectRefused({ call: () => acquire(realId, owner), errorClass: InvalidLockArgumentError, code: 'INVALID_ARGUMENT', names: 'owner' }),
  );
  test.each(badIds)('refuses the id %s', (_label, id) =>
    expectRefused({ call: () => acquire(id, 'session'), errorClass: InvalidLockArgumentError, code: 'INVALID_ARGUMENT', names: 'id' }),
  );
  test.each(badTtls)('refuses the ttl %s', (_label, ttl) =>
    expectRefused({ call: () => acquire(realId, 'session', { ttl }), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names: 'ttl' }),
  );
  test.each<[string, unknown, string]>([
    ['an unknown option', { tll: 1000 }, 'tll'],
    ['an operator as option name', { $where: 'true' }, '$where'],
    ['options that are an array', [1000], '(lock options)'],
    ['options that are a string', 'ttl=1000', '(lock options)'],
    ['options that are null', null, '(lock options)'],
  ])('refuses %s', (_label, options, names) =>
    expectRefused({ call: () => acquire(realId, 'session', options), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names }),
  );
});

// Issue 17: the group calls take a list of ids (or of [Model, id] pairs); a bad element is named by its position.
const groupCalls: [string, string, (ids: unknown[], owner: unknown, options?: unknown) => Promise<unknown>][] = [
  ['Model.lockMany', 'ids', (ids, owner, options) => WorkItem.lockMany(ids as Types.ObjectId[], owner as string, options as never)],
  ['Model.acquireLocks', 'ids', (ids, owner, options) => WorkItem.acquireLocks(ids as Types.ObjectId[], owner as string, options as never)],
  ['Model.withLocks', 'ids', (ids, owner, options) => WorkItem.withLocks(ids as Types.ObjectId[], owner as string, noop, options as never)],
  ['lockAll', 'targets', (ids, owner, options) => lockAll(ids.map((id) => [WorkItem, id]) as never, owner as string, options as never)],
];

describe.each(groupCalls)('%s', (_name, argument, call) => {
  test.each(badOwners)('refuses the owner %s', (_label, owner) =>
    expectRefused({ call: () => call([realId], owner), errorClass: InvalidLockArgumentError, code: 'INVALID_ARGUMENT', names: 'owner' }),
  );
  test.each(badIds)('refuses the id %s at its position', (_label, id) =>
    expectRefused({ call: () => call([realId, id], 'session'), errorClass: InvalidLockArgumentError, code: 'INVALID_ARGUMENT', names: `${argument}[1]` }),
  );
  test.each(badTtls)('refuses the ttl %s', (_label, ttl) =>
    expectRefused({ call: () => call([realId], 'session', { ttl }), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names: 'ttl' }),
  );
  test.each<[string, unknown, string]>([
    ['an unknown option', { tll: 1000 }, 'tll'],
    ['an operator as option name', { $where: 'true' }, '$where'],
    ['resume', { resume: 'ticket' }, 'resume'],
    ['options that are an array', [1000], '(lock options)'],
  ])('refuses %s', (_label, options, names) =>
    expectRefused({ call: () => call([realId], 'session', options), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names }),
  );
  test.each<[string, () => unknown[]]>([
    ['an empty list', () => []],
    ['the same document twice', () => [realId, realId.toHexString()]],
    ['1,001 ids', () => Array.from({ length: 1_001 }, () => new Types.ObjectId())],
  ])('refuses %s', (_label, ids) =>
    expectRefused({ call: () => call(ids(), 'session'), errorClass: InvalidLockArgumentError, code: 'INVALID_ARGUMENT', names: argument }),
  );
});

describe('per-call options of the waiting and handle calls', () => {
  const waiting: [string, (options: unknown) => Promise<unknown>][] = [
    ['Model.lock', (options) => WorkItem.lock(realId, 'session', options as never)],
    ['Model.acquireLock', (options) => WorkItem.acquireLock(realId, 'session', options as never)],
    ['Model.withLock', (options) => WorkItem.withLock(realId, 'session', noop, options as never)],
  ];
  describe.each(waiting)('%s', (_name, call) => {
    test.each<[string, unknown]>([
      ['NaN', NaN],
      ['negative', -1],
      ['Infinity', Infinity],
      ['a string', '100'],
      ['fractional', 0.5],
    ])('refuses wait = %s', (_label, wait) => expectRefused({ call: () => call({ wait }), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names: 'wait' }));
    test.each<[string, unknown]>([
      ['a plain object', { aborted: false }],
      ['an AbortController', new AbortController()],
      ['a string', 'abort'],
    ])('refuses signal = %s', (_label, signal) => expectRefused({ call: () => call({ signal }), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names: 'signal' }));
  });

  test('Model.lock does not accept autoExtend (only the handle calls do)', () =>
    expectRefused({ call: () => WorkItem.lock(realId, 'session', { autoExtend: true } as never), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names: 'autoExtend' }));

  test.each<[string, unknown]>([
    ['wait', 100],
    ['signal', new AbortController().signal],
    ['autoExtend', false],
  ])('Model.tryLock does not accept %s (it never waits)', (option, value) =>
    expectRefused({ call: () => WorkItem.tryLock(realId, 'session', { [option]: value } as never), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names: option }));

  test.each<[string, unknown]>([
    ['a string', 'yes'],
    ['a number', 1],
    ['null', null],
  ])('the handle calls refuse autoExtend = %s', async (_label, autoExtend) => {
    await expectRefused({ call: () => WorkItem.acquireLock(realId, 'session', { autoExtend } as never), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names: 'autoExtend' });
    await expectRefused({ call: () => WorkItem.withLock(realId, 'session', noop, { autoExtend } as never), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names: 'autoExtend' });
  });
});

describe('Model.withLock', () => {
  test.each<[string, unknown]>([
    ['undefined', undefined],
    ['a string', 'fn'],
    ['an object', { call: noop }],
    ['a promise', Promise.resolve()],
  ])('refuses fn = %s', (_label, fn) =>
    expectRefused({ call: () => WorkItem.withLock(realId, 'session', fn as never), errorClass: InvalidLockArgumentError, code: 'INVALID_ARGUMENT', names: 'fn' }));
});

describe('doc.extendLock', () => {
  test.each(badTtls.filter(([, ttl]) => ttl !== null))('refuses the ttl %s (and the lock keeps its expiry)', async (_label, ttl) => {
    const doc = await WorkItem.lock(realId, 'extender');
    const expiresAt = doc.heldLock()!.expiresAt;
    try {
      await expectRefused({ call: () => doc.extendLock(ttl as number), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names: 'ttl' });
      expect(doc.heldLock()!.expiresAt).toEqual(expiresAt);
    } finally {
      await doc.unlock();
    }
  });
});

describe('runWithLockOwner', () => {
  test.each(badOwners)('refuses the owner %s before running fn', async (_label, owner) => {
    let ran = false;
    await expectRefused({
      call: () => runWithLockOwner(owner as string, () => {
        ran = true;
        return WorkItem.updateOne({ _id: realId }, { $set: { title: 'x' } });
      }),
      errorClass: InvalidLockArgumentError,
      code: 'INVALID_ARGUMENT',
      names: 'owner',
    });
    expect(ran).toBe(false);
  });
  test.each<[string, unknown]>([
    ['undefined', undefined],
    ['a string', 'fn'],
  ])('refuses fn = %s', (_label, fn) =>
    expectRefused({ call: () => runWithLockOwner('session', fn as never), errorClass: InvalidLockArgumentError, code: 'INVALID_ARGUMENT', names: 'fn' }));
});

describe('lockOwnerMiddleware', () => {
  test.each<[string, unknown]>([
    ['a string', 'sessionID'],
    ['an object', { $ne: null }],
  ])('refuses owner = %s when it is created', (_label, owner) =>
    expectRefused({ call: () => lockOwnerMiddleware({ owner: owner as never }), errorClass: InvalidLockArgumentError, code: 'INVALID_ARGUMENT', names: 'owner' }));

  test.each(badOwners.filter(([, owner]) => owner !== undefined))('passes a request whose owner is %s to next(error), running nothing as it', async (_label, owner) => {
    const middleware = lockOwnerMiddleware<{ sessionID: unknown }>({ owner: (req) => req.sessionID as string });
    await expectRefused({
      call: () =>
        new Promise<void>((resolve, reject) => {
          middleware({ sessionID: owner }, {}, (error?: unknown) => (error ? reject(error) : resolve()));
        }),
      errorClass: InvalidLockArgumentError,
      code: 'INVALID_ARGUMENT',
      names: 'owner',
    });
  });
});

describe('query option lockOwner and skipLockCheck', () => {
  const writes: [string, (options: Record<string, unknown>) => Promise<unknown>][] = [
    ['updateOne', (options) => WorkItem.updateOne({ _id: realId }, { $set: { title: 'x' } }).setOptions(options).exec()],
    ['updateMany', (options) => WorkItem.updateMany({}, { $set: { title: 'x' } }).setOptions(options).exec()],
    ['findOneAndUpdate', (options) => WorkItem.findOneAndUpdate({ _id: realId }, { $set: { title: 'x' } }).setOptions(options).exec()],
    ['findOneAndReplace', (options) => WorkItem.findOneAndReplace({ _id: realId }, { title: 'x' }).setOptions(options).exec()],
    ['replaceOne', (options) => WorkItem.replaceOne({ _id: realId }, { title: 'x' }).setOptions(options).exec()],
    ['deleteOne', (options) => WorkItem.deleteOne({ _id: realId }).setOptions(options).exec()],
    ['deleteMany', (options) => WorkItem.deleteMany({}).setOptions(options).exec()],
    ['findOneAndDelete', (options) => WorkItem.findOneAndDelete({ _id: realId }).setOptions(options).exec()],
    ['Model.bulkWrite', (options) => WorkItem.bulkWrite([{ updateOne: { filter: { _id: realId }, update: { $set: { title: 'x' } } } }], options as never)],
  ];
  describe.each(writes)('%s', (_name, write) => {
    test.each(badOwners.filter(([, owner]) => owner !== undefined))('refuses lockOwner = %s', (_label, lockOwner) =>
      expectRefused({ call: () => write({ lockOwner }), errorClass: InvalidLockArgumentError, code: 'INVALID_ARGUMENT', names: 'owner' }));
    test.each<[string, unknown]>([
      ['a string', 'true'],
      ['a number', 1],
      ['an object', { $ne: false }],
    ])('refuses skipLockCheck = %s', (_label, skipLockCheck) =>
      expectRefused({ call: () => write({ skipLockCheck }), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names: 'skipLockCheck' }));
  });

  test('the target document was never written by any refused call', async () => {
    expect((await WorkItem.findById(realId).lean())!.title).toBe('target');
  });
});

describe('doc.deleteOne() and doc.save() inside a bad owner context', () => {
  test('a bad owner never gets as far as a context, so nothing is deleted', async () => {
    const doc = (await WorkItem.findById(realId))!;
    await expectRefused({ call: () => runWithLockOwner({ $ne: null } as never, () => doc.deleteOne()), errorClass: InvalidLockArgumentError, code: 'INVALID_ARGUMENT', names: 'owner' });
    expect(await WorkItem.exists({ _id: realId })).not.toBeNull();
  });
});

describe('plugin options not covered by options.test.ts', () => {
  test.each<[string, unknown, string]>([
    ['purgeAfter NaN', { purgeAfter: NaN }, 'purgeAfter'],
    ['purgeAfter negative', { purgeAfter: -1 }, 'purgeAfter'],
    ['purgeAfter Infinity', { purgeAfter: Infinity }, 'purgeAfter'],
    ['purgeAfter a string', { purgeAfter: '1000' }, 'purgeAfter'],
    ['ttl an object', { ttl: { $gt: 0 } }, 'ttl'],
    ['ttl -Infinity', { ttl: -Infinity }, 'ttl'],
    ['collection an operator object', { collection: { $ne: null } }, 'collection'],
    ['collection with a NUL byte', { collection: 'locks\0x' }, 'collection'],
    ['collection a huge string', { collection: 'c'.repeat(1000) }, 'collection'],
    ['ownerSecret a number', { ownerSecret: 1234567890123456 }, 'ownerSecret'],
    ['ownerSecret an object', { ownerSecret: { key: 'x'.repeat(32) } }, 'ownerSecret'],
    ['ownerStorage an object', { ownerStorage: { $ne: 'hash' } }, 'ownerStorage'],
    ['changeStreams unknown', { changeStreams: 'sometimes' }, 'changeStreams'],
    ['changeStreams a boolean', { changeStreams: true }, 'changeStreams'],
    ['transactions a boolean', { transactions: false }, 'transactions'],
    ['requireLock a number', { requireLock: 1 }, 'requireLock'],
    ['an operator as option name', { $where: 'true' }, '$where'],
    ['a per-call option at plugin level', { wait: 1000 }, 'wait'],
    ['options that are an array', [{ ttl: 1000 }], '(options)'],
    ['options that are a number', 30_000, '(options)'],
  ])('%s is refused at schema.plugin time, with no command sent', (_label, options, names) =>
    expectRefused({
      call: () => new Schema({ title: String }).plugin(lockPlugin, options as LockPluginOptions),
      errorClass: InvalidLockOptionError,
      code: 'INVALID_OPTION',
      names,
    }));
});

describe('the web story (issue 11): unlock, lockStatus, listLocks, tickets, labels', () => {
  let ticket: string;
  beforeAll(async () => {
    const doc = await WorkItem.lock(realId, 'ticket-holder');
    ticket = doc.heldLock()!.ticket;
    await doc.unlock();
  });

  test.each(badOwners)('Model.unlock refuses the owner %s', (_label, owner) =>
    expectRefused({ call: () => WorkItem.unlock(realId, owner as string), errorClass: InvalidLockArgumentError, code: 'INVALID_ARGUMENT', names: 'owner' }));
  test.each(badIds)('Model.unlock refuses the id %s', (_label, id) =>
    expectRefused({ call: () => WorkItem.unlock(id as Types.ObjectId, 'session'), errorClass: InvalidLockArgumentError, code: 'INVALID_ARGUMENT', names: 'id' }));

  const badTickets: [string, unknown][] = [
    ['a query object', { $ne: null }],
    ['a number', 42],
    ['null', null],
    ['an empty string', ''],
    ['a $-string', '$token'],
    ['a huge string', 'mpl1.'.repeat(100_000)],
    ['a truncated ticket', 'mpl1.abc'],
    ['a ticket with an extra part', 'mpl1.AAAAAAAAAAAAAAAAAAAAAA.1.AAAAAAAAAAAAAAAAAAAAAA.x'],
    ['a ticket whose fence overflows', 'mpl1.AAAAAAAAAAAAAAAAAAAAAA.zzzzzzzzzzz.AAAAAAAAAAAAAAAAAAAAAA'],
  ];
  test.each(badTickets)('Model.lock refuses resume = %s', (_label, resume) =>
    expectRefused({ call: () => WorkItem.lock(realId, 'session', { resume: resume as string }), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names: 'resume' }));
  test.each(badTickets)('Model.unlock refuses ticket = %s', (_label, value) =>
    expectRefused({ call: () => WorkItem.unlock(realId, 'session', { ticket: value as string }), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names: 'ticket' }));
  test('a real ticket presented for another document is refused before anything is sent', async () => {
    const otherId = (await WorkItem.create({ title: 'other' }))._id;
    await expectRefused({ call: () => WorkItem.lock(otherId, 'ticket-holder', { resume: ticket }), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names: 'resume' });
    await expectRefused({ call: () => WorkItem.unlock(otherId, 'ticket-holder', { ticket }), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names: 'ticket' });
  });
  test.each<[string, unknown, string]>([
    ['an unknown option', { force: true }, 'force'],
    ['options that are a string', 'ticket', '(unlock options)'],
    ['options that are null', null, '(unlock options)'],
  ])('Model.unlock refuses %s', (_label, options, names) =>
    expectRefused({ call: () => WorkItem.unlock(realId, 'session', options as never), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names }));
  test.each<[string, unknown]>([
    ['wait', 100],
    ['signal', new AbortController().signal],
    ['label', 'Alice'],
  ])('Model.lock refuses resume together with %s', (option, value) =>
    expectRefused({ call: () => WorkItem.lock(realId, 'session', { resume: ticket, [option]: value } as never), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names: 'resume' }));
  test('tryLock and the handle calls do not accept resume (only lock does)', async () => {
    await expectRefused({ call: () => WorkItem.tryLock(realId, 'session', { resume: ticket } as never), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names: 'resume' });
    await expectRefused({ call: () => WorkItem.acquireLock(realId, 'session', { resume: ticket } as never), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names: 'resume' });
  });

  const badLabels: [string, unknown][] = [
    ['a query object', { $ne: null }],
    ['a number', 1],
    ['null', null],
    ['an empty string', ''],
    ['101 characters', 'x'.repeat(101)],
    ['a carriage return', 'a\rb'],
    ['an escape sequence', '\u001b[31mred'],
    ['a bidi isolate', 'a\u2066b'],
  ];
  describe.each(acquirers.concat([['Model.lock', (id, owner, options) => WorkItem.lock(id as Types.ObjectId, owner as string, options as never)]]))('%s', (_name, acquire) => {
    test.each(badLabels)('refuses label = %s', (_label, label) =>
      expectRefused({ call: () => acquire(realId, 'session', { label }), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names: 'label' }));
  });

  test.each(badOwners.filter(([, owner]) => owner !== undefined))('lockStatus and listLocks refuse the owner %s', async (_label, owner) => {
    await expectRefused({ call: () => WorkItem.lockStatus([realId], { owner: owner as string }), errorClass: InvalidLockArgumentError, code: 'INVALID_ARGUMENT', names: 'owner' });
    await expectRefused({ call: () => WorkItem.listLocks({ owner: owner as string }), errorClass: InvalidLockArgumentError, code: 'INVALID_ARGUMENT', names: 'owner' });
  });
  test.each(badIds)('lockStatus refuses the id %s inside the list', (_label, id) =>
    expectRefused({ call: () => WorkItem.lockStatus([realId, id as Types.ObjectId]), errorClass: InvalidLockArgumentError, code: 'INVALID_ARGUMENT', names: 'id' }));
  test.each<[string, unknown]>([
    ['a single id', realId],
    ['a query object', { $in: [realId] }],
    ['null', null],
    ['1001 ids', Array.from({ length: 1001 }, () => realId)],
  ])('lockStatus refuses ids = %s', (_label, ids) =>
    expectRefused({ call: () => WorkItem.lockStatus(ids as never), errorClass: InvalidLockArgumentError, code: 'INVALID_ARGUMENT', names: 'ids' }));
  test.each<[string, unknown, string]>([
    ['limit 0', { limit: 0 }, 'limit'],
    ['limit a string', { limit: '10' }, 'limit'],
    ['limit above 1000', { limit: 1001 }, 'limit'],
    ['after an object', { after: { $gt: '' } }, 'after'],
    ['after not a cursor', { after: 'page-2' }, 'after'],
    ['after a cursor holding an operator', { after: `c2.${Buffer.from(mongo.BSON.serialize({ v: { $where: '1' } })).toString('base64url')}` }, 'after'],
    ['after a cursor of the old format', { after: `c1.${Buffer.from('{"id":{"$where":"1"}}').toString('base64url')}` }, 'after'],
    ['after a cursor that is not BSON', { after: 'c2.AAAA' }, 'after'],
    ['an unknown option', { skip: 5 }, 'skip'],
    ['options that are an array', [], '(list options)'],
  ])('listLocks refuses %s', (_label, options, names) =>
    expectRefused({ call: () => WorkItem.listLocks(options as never), errorClass: InvalidLockOptionError, code: 'INVALID_OPTION', names }));
});
