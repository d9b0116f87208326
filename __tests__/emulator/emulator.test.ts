/** Emulator-specific tests: Mongoose CRUD through startEmulator(), persistence restart, CLI lifecycle. */
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Decimal128, Long, MongoClient, ObjectId } from 'mongodb';
import mongoose from 'mongoose';
import { startEmulator } from '../../test-backend/emulator';

describe('emulator', () => {
  test('Mongoose 9 model: init, create, find, update, delete, duplicate key', async () => {
    const emu = await startEmulator();
    const conn = await mongoose.createConnection(emu.uri).asPromise();
    try {
      const Item = conn.model('Item', new mongoose.Schema({ name: { type: String, unique: true }, n: Number }));
      await Item.init();
      const doc = await Item.create({ name: 'a', n: 1 });
      doc.n = 2;
      await doc.save();
      expect((await Item.findById(doc._id).lean())?.n).toBe(2);
      await expect(Item.create({ name: 'a' })).rejects.toMatchObject({ code: 11000, keyValue: { name: 'a' } });
      await Item.updateOne({ _id: doc._id }, { $inc: { n: 5 } });
      expect((await Item.findOne({ name: 'a' }).lean())?.n).toBe(7);
      await Item.deleteOne({ _id: doc._id });
      expect(await Item.countDocuments()).toBe(0);
    } finally {
      await conn.close();
      await emu.stop();
    }
  });

  test('transaction writes are invisible until commit', async () => {
    const emu = await startEmulator();
    const client = await new MongoClient(emu.uri).connect();
    try {
      const c = client.db('t').collection<{ _id: string }>('x');
      const s = client.startSession();
      s.startTransaction();
      await c.insertOne({ _id: 'a' }, { session: s });
      expect(await c.findOne({ _id: 'a' })).toBeNull();
      await s.commitTransaction();
      await s.endSession();
      expect(await c.findOne({ _id: 'a' })).toEqual({ _id: 'a' });
    } finally {
      await client.close();
      await emu.stop();
    }
  });

  test('persistence: restart on the same dbpath restores documents, types and indexes', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'emu-'));
    const id = new ObjectId();
    const at = new Date();
    let emu = await startEmulator({ dbpath: dir });
    let client = await new MongoClient(emu.uri).connect();
    await client.db('p').collection('c').createIndex({ at: 1 }, { expireAfterSeconds: 3600 });
    await client.db('p').collection('c').insertOne({ _id: id, at, big: Long.fromString('9007199254740993'), d: Decimal128.fromString('1.5') });
    await client.close();
    await emu.stop();
    emu = await startEmulator({ dbpath: dir });
    client = await new MongoClient(emu.uri).connect();
    try {
      const doc = await client.db('p').collection('c').findOne({ _id: id });
      expect(doc?.at).toEqual(at);
      expect(String(doc?.big)).toBe('9007199254740993');
      expect(doc?.d).toBeInstanceOf(Decimal128);
      const idx = await client.db('p').collection('c').indexes();
      expect(idx.find((i) => i.name === 'at_1')?.expireAfterSeconds).toBe(3600);
    } finally {
      await client.close();
      await emu.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test.each([
    ['replica set (default)', [] as string[], /\?replicaSet=rs0$/, 'rs0'],
    ['--standalone', ['--standalone'], /^mongodb:\/\/127\.0\.0\.1:\d+\/$/, undefined],
  ])('CLI %s prints the URI and exits 0 on SIGTERM', async (_label, extra, uriPattern, setName) => {
    const child = spawn(process.execPath, [require.resolve('tsx/cli'), path.join(__dirname, '../../test-backend/emulator/cli.ts'), '--port', '0', ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      const uri = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('CLI did not print a URI within 20 s')), 20_000);
        let out = '';
        child.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          const m = /mongodb:\/\/\S+/.exec(out);
          if (m) {
            clearTimeout(timer);
            resolve(m[0]);
          }
        });
      });
      expect(uri).toMatch(uriPattern);
      const client = await new MongoClient(uri).connect();
      const hello = await client.db('admin').command({ hello: 1 });
      expect(hello.setName).toBe(setName);
      await client.close();
      const code = await new Promise<number | null>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('CLI did not exit within 10 s of SIGTERM')), 10_000);
        child.once('exit', (c) => {
          clearTimeout(timer);
          resolve(c);
        });
        child.kill('SIGTERM');
      });
      expect(code).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }, 40_000);
});
