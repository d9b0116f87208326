/**
 * The emulator's `failCommand` fail point: first the module on its own (no sockets), then end to
 * end through the official driver against a private emulator.
 */
import { createFailPoints, type FailPointContext } from '../../test-backend/emulator/failpoints';
import { MongoCommandError } from '../../test-backend/emulator/errors';

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
