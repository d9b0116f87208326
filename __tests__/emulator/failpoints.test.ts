/**
 * The emulator's `failCommand` fail point: first the module on its own (no sockets), then end to
 * end through the official driver against a private emulator.
 */
import { MongoClient, MongoNetworkError, MongoWriteConcernError, type Document, type MongoServerError } from 'mongodb';
import { startEmulator, type RunningEmulator } from '../../test-backend/emulator';
import { createFailPoints, type FailPointContext } from '../../test-backend/emulator/failpoints';
import { MongoCommandError } from '../../test-backend/emulator/errors';
import { WriteFailPoints } from '../../test-backend/emulator/write-failpoints';
import { usesPrivateServer } from '../support/private-server';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

const ctx = (commandName: string, extra: Partial<FailPointContext> = {}): FailPointContext => ({
  commandName,
  connectionId: 1,
  inTransaction: false,
  ...extra,
});

function configureError(fn: () => unknown): MongoCommandError {
  try {
    fn();
  } catch (e) {
    if (e instanceof MongoCommandError) return e;
    throw e;
  }
  throw new Error('expected configure to fail');
}

describe('failCommand fail point (module)', () => {
  it('answers configureFailPoint with the number of times it was entered, like mongod', () => {
    const fp = createFailPoints();
    expect(fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['find'], errorCode: 2 } })).toEqual({ count: 0, ok: 1 });
    fp.intercept(ctx('find'));
    fp.intercept(ctx('find'));
    fp.intercept(ctx('insert'));
    expect(fp.configure({ configureFailPoint: 'failCommand', mode: 'off' })).toEqual({ count: 2, ok: 1 });
    expect(fp.intercept(ctx('find'))).toBeUndefined();
  });

  it('fails only listed commands, with mongod-shaped error replies', () => {
    const fp = createFailPoints();
    fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['insert', 'configureFailPoint'], errorCode: 11000 } });
    expect(fp.intercept(ctx('insert'))).toEqual({
      kind: 'error',
      reply: { ok: 0, errmsg: "Failing command via 'failCommand' failpoint", code: 11000, codeName: 'DuplicateKey' },
    });
    expect(fp.intercept(ctx('find'))).toBeUndefined();
    expect(fp.intercept(ctx('hello'))).toBeUndefined();
    expect(fp.intercept(ctx('configureFailPoint'))).toBeUndefined(); // never failed, even when listed
  });

  it('names unknown codes Location<code>, as mongod does', () => {
    const fp = createFailPoints();
    fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['ping'], errorCode: 9999 } });
    expect(fp.intercept(ctx('ping'))).toMatchObject({ kind: 'error', reply: { code: 9999, codeName: 'Location9999' } });
  });

  it('fails hello only when it is listed', () => {
    const fp = createFailPoints();
    fp.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello'], closeConnection: true } });
    expect(fp.intercept(ctx('isMaster'))).toBeUndefined();
    expect(fp.intercept(ctx('hello'))).toEqual({ kind: 'close' });
  });

  it('{ times: n } fires n times on matching commands only, then turns itself off', () => {
    const fp = createFailPoints();
    fp.configure({ configureFailPoint: 'failCommand', mode: { times: 2 }, data: { failCommands: ['update'], errorCode: 91 } });
    expect(fp.intercept(ctx('find'))).toBeUndefined(); // does not consume an activation
    expect(fp.intercept(ctx('update'))?.kind).toBe('error');
    expect(fp.intercept(ctx('update'))?.kind).toBe('error');
    expect(fp.intercept(ctx('update'))).toBeUndefined();
  });

  it('{ skip: n } lets the first n matching commands through, then fires on every one', () => {
    const fp = createFailPoints();
    fp.configure({ configureFailPoint: 'failCommand', mode: { skip: 2 }, data: { failCommands: ['delete'], errorCode: 8 } });
    expect(fp.intercept(ctx('insert'))).toBeUndefined();
    expect(fp.intercept(ctx('delete'))).toBeUndefined();
    expect(fp.intercept(ctx('delete'))).toBeUndefined();
    expect(fp.intercept(ctx('delete'))?.kind).toBe('error');
    expect(fp.intercept(ctx('delete'))?.kind).toBe('error');
  });

  it('activationProbability 0 never fires and 1 always does', () => {
    const fp = createFailPoints();
    fp.configure({ configureFailPoint: 'failCommand', mode: { activationProbability: 0 }, data: { failCommands: ['find'], errorCode: 2 } });
    for (let i = 0; i < 20; i++) expect(fp.intercept(ctx('find'))).toBeUndefined();
    fp.configure({ configureFailPoint: 'failCommand', mode: { activationProbability: 1 }, data: { failCommands: ['find'], errorCode: 2 } });
    for (let i = 0; i < 20; i++) expect(fp.intercept(ctx('find'))?.kind).toBe('error');
  });

  it('matches the appName when one is given', () => {
    const fp = createFailPoints();
    fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['find'], errorCode: 2, appName: 'victim' } });
    expect(fp.intercept(ctx('find'))).toBeUndefined();
    expect(fp.intercept(ctx('find', { appName: 'bystander' }))).toBeUndefined();
    expect(fp.intercept(ctx('find', { appName: 'victim' }))?.kind).toBe('error');
  });

  it('matches a namespace when one is given', () => {
    const fp = createFailPoints();
    fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['insert'], errorCode: 2, namespace: 'db.a' } });
    expect(fp.intercept(ctx('insert', { db: 'db', command: { insert: 'b' } }))).toBeUndefined();
    expect(fp.intercept(ctx('insert', { db: 'db', command: { insert: 'a' } }))?.kind).toBe('error');
  });

  it('blocks, then lets the command run; with errorCode or closeConnection it blocks first, then fails', () => {
    const fp = createFailPoints();
    fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['find'], blockConnection: true, blockTimeMS: 50 } });
    expect(fp.intercept(ctx('find'))).toEqual({ kind: 'block', ms: 50 });
    fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['find'], blockConnection: true, blockTimeMS: 50, errorCode: 91 } });
    expect(fp.intercept(ctx('find'))).toMatchObject({ kind: 'block', ms: 50, then: { kind: 'error', reply: { code: 91, codeName: 'ShutdownInProgress' } } });
    fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['find'], blockConnection: true, blockTimeMS: 5, closeConnection: true, errorCode: 2 } });
    expect(fp.intercept(ctx('find'))).toEqual({ kind: 'block', ms: 5, then: { kind: 'close' } });
  });

  it('adds the labels mongod adds: RetryableWriteError on retryable writes, TransientTransactionError in transactions', () => {
    const fp = createFailPoints();
    fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['insert', 'find', 'commitTransaction'], errorCode: 91 } });
    const lsid = { id: 'x' };
    expect(fp.intercept(ctx('insert', { lsid, txnNumber: 1 }))).toMatchObject({ reply: { errorLabels: ['RetryableWriteError'] } });
    expect(fp.intercept(ctx('insert'))).not.toHaveProperty('reply.errorLabels');
    expect(fp.intercept(ctx('find', { lsid }))).not.toHaveProperty('reply.errorLabels');
    expect(fp.intercept(ctx('insert', { lsid, txnNumber: 2, inTransaction: true }))).toMatchObject({ reply: { errorLabels: ['TransientTransactionError'] } });
    expect(fp.intercept(ctx('commitTransaction', { lsid, txnNumber: 2, inTransaction: true }))).toMatchObject({ reply: { errorLabels: ['RetryableWriteError'] } });
    fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['insert'], errorCode: 112 } });
    expect(fp.intercept(ctx('insert', { lsid, txnNumber: 3, inTransaction: true }))).toMatchObject({ reply: { errorLabels: ['TransientTransactionError'] } });
    expect(fp.intercept(ctx('insert', { lsid, txnNumber: 4 }))).not.toHaveProperty('reply.errorLabels');
  });

  it('uses the errorLabels given in data instead of computing them', () => {
    const fp = createFailPoints();
    fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['insert'], errorCode: 91, errorLabels: ['Custom'] } });
    expect(fp.intercept(ctx('insert', { lsid: {}, txnNumber: 1 }))).toMatchObject({ reply: { errorLabels: ['Custom'] } });
    fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['insert'], errorCode: 91, errorLabels: [] } });
    expect(fp.intercept(ctx('insert', { lsid: {}, txnNumber: 1 }))).not.toHaveProperty('reply.errorLabels');
  });

  it('writeConcernError: the command runs, then its reply carries the fail point document', () => {
    const fp = createFailPoints();
    const wce = { code: 91, errmsg: 'Replication is being shut down' };
    fp.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['insert', 'find'], writeConcernError: wce } });
    expect(fp.intercept(ctx('insert'))).toBeUndefined(); // nothing happens before the command
    expect(fp.afterCommand(ctx('find'), { ok: 1 })).toEqual({ ok: 1 }); // find takes no write concern
    expect(fp.afterCommand(ctx('insert', { lsid: {}, txnNumber: 1 }), { n: 1, ok: 1 })).toEqual({ n: 1, ok: 1, writeConcernError: wce, errorLabels: ['RetryableWriteError'] });
    expect(fp.afterCommand(ctx('insert'), { n: 1, ok: 1 })).toEqual({ n: 1, ok: 1 }); // times: 1 used up
    expect(fp.configure({ configureFailPoint: 'failCommand', mode: 'off' })).toEqual({ count: 1, ok: 1 });
  });

  it('rejects what it does not implement, naming it', () => {
    const fp = createFailPoints();
    const err = configureError(() => fp.configure({ configureFailPoint: 'hangBeforeCommit', mode: 'alwaysOn' }));
    expect(err.code).toBe(266);
    expect(err.codeName).toBe('FailPointSetFailed');
    expect(err.message).toContain('hangBeforeCommit not found');
    expect(configureError(() => fp.configure({ configureFailPoint: 'failCommand', mode: 'sometimes' })).message).toBe('unknown mode: sometimes');
    expect(configureError(() => fp.configure({ configureFailPoint: 'failCommand' })).code).toBe(20);
    expect(configureError(() => fp.configure({ configureFailPoint: 'failCommand', mode: { times: -1 } })).message).toBe("'times' option to 'mode' must be positive");
    expect(configureError(() => fp.configure({ configureFailPoint: 'failCommand', mode: { times: 1, skip: 1 } })).code).toBe(2);
    expect(configureError(() => fp.configure({ configureFailPoint: 'failCommand', mode: { activationProbability: 2 } })).code).toBe(2);
    expect(configureError(() => fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['find'], threadName: 'x' } })).message).toContain("'threadName'");
    expect(configureError(() => fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['find'], blockConnection: true } })).code).toBe(72);
    expect(configureError(() => fp.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: 'find' } })).code).toBe(14);
    expect(configureError(() => fp.configure({ configureFailPoint: 'failCommand', mode: 'off', $db: 'test' })).code).toBe(13);
  });
});

describe('failCommand fail point (through the driver)', () => {
  let emulator: RunningEmulator;
  let client: MongoClient;
  const admin = () => client.db('admin');
  const configure = (spec: Document) => admin().command({ configureFailPoint: 'failCommand', ...spec });

  beforeAll(async () => {
    emulator = await startEmulator({ port: 0 });
    client = new MongoClient(emulator.uri, { appName: 'fp-e2e', serverSelectionTimeoutMS: 5000, retryWrites: false, retryReads: false });
    await client.connect();
  });
  afterEach(async () => {
    await configure({ mode: 'off' });
  });
  afterAll(async () => {
    await client?.close();
    await emulator?.stop();
  });

  const coll = () => client.db('fp').collection('items');

  it('fails the listed command with the given code, mongod-shaped, and reports the count', async () => {
    expect(await configure({ mode: { times: 1 }, data: { failCommands: ['find'], errorCode: 2 } })).toMatchObject({ count: 0, ok: 1 });
    const err = await coll().findOne({}).catch((e: MongoServerError) => e);
    expect(err).toMatchObject({ code: 2, codeName: 'BadValue', message: "Failing command via 'failCommand' failpoint" });
    expect(await coll().findOne({})).toBeNull(); // times: 1 is used up
    expect(await configure({ mode: 'off' })).toMatchObject({ count: 1, ok: 1 });
  });

  it('closeConnection drops the socket without a reply; the next command works', async () => {
    await configure({ mode: { times: 1 }, data: { failCommands: ['find'], closeConnection: true } });
    const err = await coll().findOne({}).catch((e: Error) => e);
    expect(err).toBeInstanceOf(MongoNetworkError);
    expect(await coll().findOne({})).toBeNull();
  });

  it('blockConnection delays the command, then runs it; with errorCode it delays, then fails', async () => {
    await configure({ mode: { times: 1 }, data: { failCommands: ['insert'], blockConnection: true, blockTimeMS: 300 } });
    let started = Date.now();
    await coll().insertOne({ _id: 'blocked' } as Document);
    expect(Date.now() - started).toBeGreaterThanOrEqual(280);
    expect(await coll().countDocuments({ _id: 'blocked' } as Document)).toBe(1);

    // A plain error code: a state-change code (91, 10107...) would make the driver mark the server
    // Unknown and wait for its next heartbeat, on a real mongod as well.
    await configure({ mode: { times: 1 }, data: { failCommands: ['insert'], blockConnection: true, blockTimeMS: 300, errorCode: 2 } });
    started = Date.now();
    const err = await coll().insertOne({ _id: 'never' } as Document).catch((e: MongoServerError) => e);
    expect(Date.now() - started).toBeGreaterThanOrEqual(280);
    expect(err).toMatchObject({ code: 2 });
    expect(await coll().countDocuments({ _id: 'never' } as Document)).toBe(0);
  });

  // appName matching is covered by the module tests above: under Jest the driver (7.x) sends its
  // handshake with an empty `client` document (its metadata Map does not survive Jest's module
  // realm), so no server, real or emulated, can see the appName of a client created in a test.

  it('a retryable write failed with a retryable code carries RetryableWriteError, so the driver retries it once', async () => {
    const retrying = new MongoClient(emulator.uri, { appName: 'fp-retry', serverSelectionTimeoutMS: 5000, retryWrites: true, monitorCommands: true });
    const inserts: string[] = [];
    retrying.on('commandFailed', (e) => e.commandName === 'insert' && inserts.push('failed'));
    retrying.on('commandSucceeded', (e) => e.commandName === 'insert' && inserts.push('succeeded'));
    try {
      await configure({ mode: { times: 1 }, data: { failCommands: ['insert'], errorCode: 91 } });
      await retrying.db('fp').collection('items').insertOne({ _id: 'retried' } as Document);
      expect(inserts).toEqual(['failed', 'succeeded']);
      expect(await coll().countDocuments({ _id: 'retried' } as Document)).toBe(1);
    } finally {
      await retrying.close();
    }
  });

  it('writeConcernError: the write is applied and the reply reports the write concern error', async () => {
    await configure({ mode: { times: 1 }, data: { failCommands: ['insert'], writeConcernError: { code: 100, errmsg: 'Not enough data-bearing nodes' } } });
    const err = await coll().insertOne({ _id: 'wce' } as Document).catch((e: Error) => e);
    expect(err).toBeInstanceOf(MongoWriteConcernError);
    expect(err).toMatchObject({ code: 100 });
    expect(await coll().countDocuments({ _id: 'wce' } as Document)).toBe(1);
  });

  it('answers unknown fail points and bad modes with errors, never a silent success', async () => {
    await expect(admin().command({ configureFailPoint: 'hangAfterCollectionInserts', mode: 'alwaysOn' })).rejects.toMatchObject({ code: 266 });
    await expect(configure({ mode: { times: -1 } })).rejects.toMatchObject({ code: 2 });
    await expect(client.db('fp').command({ configureFailPoint: 'failCommand', mode: 'off' })).rejects.toMatchObject({ code: 13 });
  });
});

// getmore_cmd.cpp (re-read): failGetMoreAfterCursorCheckout uasserts errorCode (InternalError when
// omitted) with "Hit the 'failGetMoreAfterCursorCheckout' failpoint"; its activation filters
// (shouldActivateFailCommandFailPoint: appName, namespace...) are refused, not ignored.
describe('failGetMoreAfterCursorCheckout (module)', () => {
  function fired(data: Document, isChangeStream = false): MongoCommandError {
    const fp = new WriteFailPoints();
    fp.configure('failGetMoreAfterCursorCheckout', { mode: { times: 1 }, data });
    try {
      fp.afterGetMoreCheckout(isChangeStream);
    } catch (e) {
      if (e instanceof MongoCommandError) return e;
      throw e;
    }
    throw new Error('expected the fail point to fire');
  }

  it("fails with the errorCode and mongod's message; InternalError when no errorCode is given", () => {
    const e = fired({ errorCode: 6 }, true);
    expect([e.code, e.codeName, e.message, e.extra.errorLabels]).toEqual([6, 'HostUnreachable', "Hit the 'failGetMoreAfterCursorCheckout' failpoint", ['ResumableChangeStreamError']]);
    const d = fired({});
    expect([d.code, d.codeName]).toEqual([1, 'InternalError']);
  });

  it('refuses activation filters it does not reproduce', () => {
    const fp = new WriteFailPoints();
    const e = configureError(() => fp.configure('failGetMoreAfterCursorCheckout', { mode: 'alwaysOn', data: { errorCode: 6, appName: 'x' } }));
    expect(e.message).toContain('appName');
  });
});
