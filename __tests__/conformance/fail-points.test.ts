/**
 * The failCommand fail point as mongod implements it (enableTestCommands=1): errorCode with
 * errorLabels, closeConnection, blockConnection/blockTimeMS, modes { times }, { skip },
 * 'alwaysOn' and 'off', and the appName filter. Every fail point here names the appName of a
 * client owned by this file, so test files running in parallel are never affected.
 *
 * Sources ((*): location or wording recalled, not re-read for this audit): the failCommand fail point as the driver specifications use it (mongodb/specifications
 * source/transactions/tests/README.md and source/retryable-writes/tests/README.md: data.failCommands,
 * errorCode, errorLabels, closeConnection, blockConnection/blockTimeMS, appName, modes times/skip/
 * alwaysOn/off); server implementation src/mongo/db/commands/fail_point_cmd.cpp and
 * CommandHelpers::evaluateFailCommandFailPoint (src/mongo/db/commands.cpp, re-read: errorCode gives "Failing command via 'failCommand' failpoint"). The driver retrying a
 * RetryableWriteError once with the same lsid/txnNumber: retryable-writes spec.
 */
import { MongoNetworkError, type CommandStartedEvent, type Db, type Document, type MongoClient } from 'mongodb';
import { adminCommand, deploymentFacts, describeError, describeIf, expectServerError, openClient, settle, uniqueDbName, type Loose } from './support/server';
import { usesPrivateServer } from '../support/private-server';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

const dbName = uniqueDbName('conf_failpoints');
const APP = `mpl-conf-fp-${process.pid}`;
const OTHER_APP = `mpl-conf-fp-other-${process.pid}`;

let admin: MongoClient;
let target: MongoClient;
let other: MongoClient;
let db: Db;
const started: CommandStartedEvent[] = [];

function failPoint(mode: Document | string, data: Document): Promise<Document> {
  return adminCommand(admin, { configureFailPoint: 'failCommand', mode, data: { appName: APP, ...data } });
}

const facts = deploymentFacts();

describeIf(facts.failPoints, `fail points are unavailable on this deployment (${facts.failPointsReason ?? 'unknown reason'}); mongod needs --setParameter enableTestCommands=1`)(
  'failCommand fail point',
  () => {
    beforeAll(async () => {
      admin = await openClient();
      // No driver retries, so every injected failure reaches the test.
      target = await openClient({ appName: APP, retryReads: false, retryWrites: false, monitorCommands: true });
      other = await openClient({ appName: OTHER_APP, retryReads: false, retryWrites: false });
      target.on('commandStarted', (event) => started.push(event));
      db = target.db(dbName);
      await db.collection<Loose>('fp').insertOne({ _id: 1, v: 'x' });
    });

    afterEach(async () => {
      const reply = await adminCommand(admin, { configureFailPoint: 'failCommand', mode: 'off' });
      expect(reply.ok).toBe(1);
    });

    afterAll(async () => {
      await admin.db(dbName).dropDatabase();
      await Promise.all([admin.close(), target.close(), other.close()]);
    });

    const find = (client: MongoClient = target): Promise<unknown[]> => client.db(dbName).collection<Loose>('fp').find({ _id: 1 }).toArray();

    test('configureFailPoint answers ok', async () => {
      const reply = await failPoint({ times: 1 }, { failCommands: ['distinct'], errorCode: 2 });
      expect(reply.ok).toBe(1);
    });

    test('errorCode with { times: 2 } fails the next two matching commands, then lets them through', async () => {
      await failPoint({ times: 2 }, { failCommands: ['find'], errorCode: 2 });
      const first = await expectServerError(find(), 2);
      expect(first.message).toContain('failCommand');
      await expectServerError(find(), 2);
      expect(await find()).toEqual([{ _id: 1, v: 'x' }]);
      // Commands not listed are never failed.
      expect(await db.collection('fp').countDocuments()).toBe(1);
    });

    test('errorLabels are attached to the injected error', async () => {
      await failPoint({ times: 1 }, { failCommands: ['insert'], errorCode: 112, errorLabels: ['TransientTransactionError'] });
      const error = await expectServerError(db.collection<Loose>('fp_labels').insertOne({ _id: 'a' }), 112);
      expect(error.hasErrorLabel('TransientTransactionError')).toBe(true);
      expect(error.errorLabels).toEqual(['TransientTransactionError']);
      expect(await db.collection('fp_labels').countDocuments()).toBe(0);
    });

    // Retryable writes need a replica set or mongos (retryable-writes spec, "Supported Server
    // Versions": not on a standalone), so on a standalone this one is skipped, and counted so.
    const retryableTest = facts.setName !== undefined ? test : test.skip;
    if (facts.setName === undefined) console.warn('[conformance] skipping the retryable-write fail point test: the deployment is a standalone');
    retryableTest('a failed write is not applied; with retryable writes the driver retries it once and it is applied once', async () => {
      const retrying = await openClient({ appName: APP, retryWrites: true, monitorCommands: true });
      const inserts: CommandStartedEvent[] = [];
      retrying.on('commandStarted', (event) => {
        if (event.commandName === 'insert') inserts.push(event);
      });
      try {
        await failPoint({ times: 1 }, { failCommands: ['insert'], errorCode: 189, errorLabels: ['RetryableWriteError'] });
        const result = await retrying.db(dbName).collection<Loose>('fp_retry').insertOne({ _id: 'once' });
        expect(result.insertedId).toBe('once');
        expect(inserts).toHaveLength(2);
        expect(inserts[1].command.txnNumber).toEqual(inserts[0].command.txnNumber);
        expect(JSON.stringify(inserts[1].command.lsid)).toBe(JSON.stringify(inserts[0].command.lsid));
        expect(await db.collection('fp_retry').find().toArray()).toEqual([{ _id: 'once' }]);
      } finally {
        await retrying.close();
      }
    });

    test('{ skip: 1 } lets the first matching command through and fails the following ones until off', async () => {
      await failPoint({ skip: 1 }, { failCommands: ['find'], errorCode: 2 });
      expect(await find()).toEqual([{ _id: 1, v: 'x' }]);
      await expectServerError(find(), 2);
      await expectServerError(find(), 2);
      await adminCommand(admin, { configureFailPoint: 'failCommand', mode: 'off' });
      expect(await find()).toEqual([{ _id: 1, v: 'x' }]);
    });

    test("'alwaysOn' fails every matching command until mode 'off'", async () => {
      await failPoint('alwaysOn', { failCommands: ['find', 'aggregate'], errorCode: 2 });
      for (let i = 0; i < 3; i += 1) await expectServerError(find(), 2);
      await expectServerError(db.collection('fp').aggregate([]).toArray(), 2);
      await adminCommand(admin, { configureFailPoint: 'failCommand', mode: 'off' });
      expect(await find()).toEqual([{ _id: 1, v: 'x' }]);
    });

    test('appName limits the fail point to clients with that application name', async () => {
      await failPoint('alwaysOn', { failCommands: ['find'], errorCode: 2 });
      expect(await find(other)).toEqual([{ _id: 1, v: 'x' }]);
      expect(await find(admin)).toEqual([{ _id: 1, v: 'x' }]);
      await expectServerError(find(target), 2);
    });

    test('closeConnection closes the socket: the driver reports a network error, the next command works', async () => {
      await failPoint({ times: 1 }, { failCommands: ['find'], closeConnection: true });
      const outcome = await settle(find());
      expect(outcome.ok).toBe(false);
      const error = (outcome as { error: unknown }).error;
      expect({ isNetworkError: error instanceof MongoNetworkError, error: describeError(error) }).toMatchObject({ isNetworkError: true });
      expect(await find()).toEqual([{ _id: 1, v: 'x' }]);
    });

    test('blockConnection delays the command by blockTimeMS and then runs it', async () => {
      await failPoint({ times: 1 }, { failCommands: ['find'], blockConnection: true, blockTimeMS: 800 });
      let t = Date.now();
      expect(await find()).toEqual([{ _id: 1, v: 'x' }]);
      const blocked = Date.now() - t;
      t = Date.now();
      expect(await find()).toEqual([{ _id: 1, v: 'x' }]);
      const unblocked = Date.now() - t;
      expect(blocked).toBeGreaterThanOrEqual(750);
      expect(blocked).toBeLessThan(5000);
      expect(unblocked).toBeLessThan(750);
    });

    test('blockConnection with errorCode blocks, then fails', async () => {
      await failPoint({ times: 1 }, { failCommands: ['find'], blockConnection: true, blockTimeMS: 500, errorCode: 2 });
      const t = Date.now();
      await expectServerError(find(), 2);
      expect(Date.now() - t).toBeGreaterThanOrEqual(450);
    });

    test('a fail point on one command leaves other commands and other clients alone', async () => {
      started.length = 0;
      await failPoint({ times: 5 }, { failCommands: ['update'], errorCode: 2 });
      expect(await find()).toEqual([{ _id: 1, v: 'x' }]);
      await expectServerError(db.collection<Loose>('fp').updateOne({ _id: 1 }, { $set: { v: 'y' } }), 2);
      const viaOther = await other.db(dbName).collection<Loose>('fp').updateOne({ _id: 1 }, { $set: { v: 'z' } });
      expect(viaOther).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
      expect(started.filter((e) => e.commandName === 'update')).toHaveLength(1);
    });
  },
);
