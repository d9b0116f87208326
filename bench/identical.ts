/**
 * Benchmark 1b (issue 16, Performance): the plugin against the raw driver sending the identical
 * commands (bench/replay.ts says how a replay is made identical, and checks it), for
 *  - `Model.lock` + `doc.unlock()` (acquire, load, release);
 *  - `doc.save()` by the holder (the guard's verify in the save's transaction, the save, the commit);
 *  - `doc.saveAndUnlock()` (the release in the save's transaction, the save, the commit; the lock
 *    is taken before the timer starts, on both sides);
 *  - a guarded `updateOne({ _id }, { $inc }, { lockOwner })` by the holder;
 *  - a guarded `updateOne({ _id }, { $inc })` of a document nobody holds (its lock record released).
 * A third side sends the same commands with Mongoose doing what Mongoose does in the plugin's
 * operation (loading and hydrating the document, `doc.save()`, `Model.updateOne()`, on a model
 * without the plugin, in the replay's transaction) and the raw driver the rest: the plugin against
 * it is the plugin's own cost, and it against the raw replay is Mongoose's.
 * Sizes: BENCH_REPLAY_CYCLES cycles per round (default 400, scaled by BENCH_SCALE), BENCH_REPLAY_ROUNDS
 * rounds (default 5) after warm-up rounds that end when the ratios stop drifting (BENCH_REPLAY_SETTLE=0:
 * none); a control side (a second copy of the raw side) gives the A/A ratio of every round; the sides interleaved in blocks (bench/replay.ts, compare), or rotating every
 * cycle as before with BENCH_REPLAY_SCHEDULE=rotate.
 */
import { Schema, type Connection, type HydratedDocument, type Model } from 'mongoose';
import type { ClientSession, Db, Document } from 'mongodb';
import { lockPlugin, type LockableModel, type LockMethods } from '../src';
import { assertSameCommands, compare, DriverReplayer, freshToken, recordCommands, recordedTokens, replayable, Replayer, scheduleFromEnv, substitute, type ReplayCommand, type ReplayComparison } from './replay';

interface Row {
  title: string;
  n: number;
}
type RowModel = LockableModel<Row>;
type RowDoc = HydratedDocument<Row> & LockMethods;

const OWNER = 'bench-owner';
/** A value of `n` no cycle saves: marks the saved value in a recording. */
const SENTINEL = 987_654_321;
/** The collections of the plugin's model and of the model without the plugin: names of one length, so the commands have one size. */
const GUARDED = 'bench_guarded';
const MONGOOSE = 'bench_mongoose';

const names = (commands: Document[]) => commands.map((c) => Object.keys(c)[0]!);
/** The position of the first command named `name` (its first key: a findAndModify also has an `update` field). */
const indexOf = (commands: Document[], name: string) => commands.findIndex((c) => Object.keys(c)[0] === name);

/** The bodies of `commands` for one cycle: each recorded random token replaced by a fresh one, and `values` replaced. */
function cycleBodies(commands: ReplayCommand[], tokens: string[], values: [unknown, unknown][] = []): Document[] {
  const map = new Map<unknown, unknown>([...tokens.map((t) => [t, freshToken()] as [unknown, unknown]), ...values]);
  return commands.map((c) => substitute(c.body, map) as Document);
}

/** A recording of the Mongoose side with the other model's collection named as the plugin's. */
const asGuarded = (sent: Document[]) => sent.map((c) => substitute(c, new Map([[MONGOOSE, GUARDED]])) as Document);

export async function benchIdentical(connection: Connection, db: Db, scale: number): Promise<ReplayComparison[]> {
  const cycles = Math.max(20, Math.round(Number(process.env.BENCH_REPLAY_CYCLES ?? 400) * scale));
  const rounds = Math.max(1, Number(process.env.BENCH_REPLAY_ROUNDS ?? 5));
  // Untimed cycles first, as many as a round at least: the first hundreds of cycles pay for the JIT
  // compiling the plugin's, Mongoose's and the driver's paths. Then warm-up rounds until the ratios
  // stop drifting (bench/replay.ts, Settle): from a cold start lock + unlock still improves for
  // 3,000-6,000 cycles per side (bench/replay-warmup.ts; docs/evidence.md). BENCH_REPLAY_SETTLE=0
  // skips them (the figures of a colder process).
  const settle = process.env.BENCH_REPLAY_SETTLE === '0' ? undefined : { window: 3, tolerance: 0.01, maxRounds: Math.max(6, Math.round(20 * scale)) };
  const sizes = { cycles, rounds, warmup: Math.max(cycles, Math.round(500 * scale)), schedule: scheduleFromEnv(), ...(settle ? { settle } : {}) };
  const schema = new Schema<Row, RowModel, LockMethods>({ title: String, n: Number }, { collection: GUARDED });
  schema.plugin(lockPlugin, { ttl: 600_000 });
  const M = connection.model<Row, RowModel>('ReplayGuarded', schema);
  const Plain = connection.model<Row>('ReplayMongoose', new Schema<Row>({ title: String, n: Number }, { collection: MONGOOSE })) as Model<Row>;
  await M.init();
  await M.lockModel().init();
  await Plain.init();
  const rows = Array.from({ length: 5 }, (_, i) => ({ title: `replay ${i}`, n: 0 }));
  const [idCycle, idSave, idSaveUnlock, idUpdateHeld, idUpdateFree] = (await M.insertMany(rows)).map((d) => d._id);
  await Plain.insertMany([idCycle, idSave, idSaveUnlock, idUpdateHeld, idUpdateFree].map((_id, i) => ({ _id, ...rows[i] })));
  // The raw side: the driver's own API sending the same commands (DriverReplayer); the floor:
  // db.command on one long-lived session with the txnNumber set by hand (Replayer).
  const driver = new DriverReplayer(db, connection);
  const replayer = new Replayer(db, connection);
  const rawSide = 'the driver API (findOneAndUpdate / findOne / updateOne, an implicit session per operation, a session per transaction)';
  const results: ReplayComparison[] = [];
  try {
    // ---- Model.lock + doc.unlock ------------------------------------------------------------
    console.log(`[bench] 1b. identical commands, ${rounds} rounds of ${cycles}: Model.lock + doc.unlock`);
    {
      const cycle = async () => (await M.lock(idCycle, OWNER)).unlock();
      const recorded = await recordCommands(connection, cycle);
      const commands = replayable(recorded);
      const tokens = recordedTokens(recorded); // the acquisition's token, in the acquire and the release
      // The Mongoose side loads the document as Mongoose does (its collection's findOne and hydrate).
      const load = new Map([[indexOf(recorded, 'find'), async () => M.hydrate(await M.collection.findOne({ _id: idCycle }, { readPreference: 'primary' }))]]);
      const pluginSent = await recordCommands(connection, cycle);
      assertSameCommands('lock + unlock', pluginSent, await recordCommands(connection, () => driver.send(commands, cycleBodies(commands, tokens))));
      assertSameCommands('lock + unlock (floor)', pluginSent, await recordCommands(connection, () => replayer.send(commands, cycleBodies(commands, tokens))));
      assertSameCommands('lock + unlock (Mongoose side)', pluginSent, await recordCommands(connection, () => driver.send(commands, cycleBodies(commands, tokens), load)));
      let prepared: Document[] = [];
      const prepare = () => void (prepared = cycleBodies(commands, tokens));
      results.push(
        await compare(
          'Model.lock + doc.unlock',
          names(recorded),
          {
            plugin: { run: cycle },
            raw: { prepare, run: () => driver.send(commands, prepared) },
            mongoose: { prepare, run: () => driver.send(commands, prepared, load) },
            floor: { prepare, run: () => replayer.send(commands, prepared) },
            control: { prepare, run: () => driver.send(commands, prepared) },
          },
          { ...sizes, rawSide, mongooseSide: 'the load: the collection findOne and Model.hydrate' },
        ),
      );
    }

    // ---- doc.save() by the holder ------------------------------------------------------------
    console.log('[bench] 1b. identical commands: doc.save() by the holder');
    {
      const held = (await M.lock(idSave, OWNER)) as RowDoc;
      const plain = (await Plain.findById(idSave).orFail()) as HydratedDocument<Row>;
      held.n = SENTINEL;
      const recorded = await recordCommands(connection, () => held.save());
      const commands = replayable(recorded);
      // The claim is fresh at every save; the acquisition's token stays (the lock is held throughout).
      const claims = recordedTokens(recorded).filter((t) => t !== held.heldLock()!.token);
      const save = new Map([[indexOf(recorded, 'update') + 1, (session: ClientSession | undefined) => plain.save({ session: session ?? null })]]);
      held.n = 1;
      plain.n = 1;
      const pluginSent = await recordCommands(connection, () => held.save());
      assertSameCommands('save', pluginSent, await recordCommands(connection, () => driver.send(commands, cycleBodies(commands, claims, [[SENTINEL, 1]]))));
      held.n = 3;
      const pluginSent3 = await recordCommands(connection, () => held.save());
      assertSameCommands('save (floor)', pluginSent3, await recordCommands(connection, () => replayer.send(commands, cycleBodies(commands, claims, [[SENTINEL, 3]]))));
      plain.n = 2;
      held.n = 2;
      assertSameCommands('save (Mongoose side)', await recordCommands(connection, () => held.save()), asGuarded(await recordCommands(connection, () => driver.send(commands, cycleBodies(commands, claims, [[SENTINEL, 2]]), save))));
      let prepared: Document[] = [];
      results.push(
        await compare(
          'doc.save() (guarded, lock held)',
          names(recorded),
          {
            plugin: { prepare: (i) => void (held.n = 10 + i), run: () => held.save() },
            raw: { prepare: (i) => void (prepared = cycleBodies(commands, claims, [[SENTINEL, 10 + i]])), run: () => driver.send(commands, prepared) },
            mongoose: { prepare: (i) => void ((prepared = cycleBodies(commands, claims)), (plain.n = 10 + i)), run: () => driver.send(commands, prepared, save) },
            floor: { prepare: (i) => void (prepared = cycleBodies(commands, claims, [[SENTINEL, 10 + i]])), run: () => replayer.send(commands, prepared) },
            control: { prepare: (i) => void (prepared = cycleBodies(commands, claims, [[SENTINEL, 10 + i]])), run: () => driver.send(commands, prepared) },
          },
          { ...sizes, rawSide, mongooseSide: 'the document write: doc.save() of a model without the plugin' },
        ),
      );
      await held.unlock();
    }

    // ---- doc.saveAndUnlock() -----------------------------------------------------------------
    console.log('[bench] 1b. identical commands: doc.saveAndUnlock()');
    {
      const acquireRecorded = await recordCommands(connection, () => M.lock(idSaveUnlock, OWNER));
      await M.forceUnlock(idSaveUnlock);
      const acquire = replayable(acquireRecorded);
      const [acquireToken] = recordedTokens(acquireRecorded);
      const first = (await M.lock(idSaveUnlock, OWNER)) as RowDoc;
      first.n = SENTINEL;
      const recorded = await recordCommands(connection, () => first.saveAndUnlock());
      const commands = replayable(recorded);
      const [releaseToken] = recordedTokens(recorded); // the acquisition's token in the release's filter
      const plain = (await Plain.findById(idSaveUnlock).orFail()) as HydratedDocument<Row>;
      const save = new Map([[indexOf(recorded, 'update') + 1, (session: ClientSession | undefined) => plain.save({ session: session ?? null })]]);
      /** Takes the lock with the replayed acquire (untimed) and returns the save's bodies for it. */
      const rawLock = async (value?: number) => {
        const token = freshToken();
        await replayer.send(acquire, acquire.map((c) => substitute(c.body, new Map([[acquireToken, token]])) as Document));
        return commands.map((c) => substitute(c.body, new Map<unknown, unknown>([[releaseToken, token], ...(value === undefined ? [] : [[SENTINEL, value] as [unknown, unknown]])])) as Document);
      };
      // The identity checks record the saves only (each side takes its lock first, unrecorded).
      const pluginLocked = (await M.lock(idSaveUnlock, OWNER)) as RowDoc;
      pluginLocked.n = 1;
      const pluginSent = await recordCommands(connection, () => pluginLocked.saveAndUnlock());
      const rawBodies = await rawLock(1);
      assertSameCommands('saveAndUnlock', pluginSent, await recordCommands(connection, () => driver.send(commands, rawBodies)));
      const floorBodies = await rawLock(1);
      assertSameCommands('saveAndUnlock (floor)', pluginSent, await recordCommands(connection, () => replayer.send(commands, floorBodies)));
      const mongooseBodies = await rawLock();
      plain.n = 1;
      assertSameCommands('saveAndUnlock (Mongoose side)', pluginSent, asGuarded(await recordCommands(connection, () => driver.send(commands, mongooseBodies, save))));
      let pluginDoc: RowDoc | undefined;
      let prepared: Document[] = [];
      results.push(
        await compare(
          'doc.saveAndUnlock()',
          names(recorded),
          {
            plugin: {
              prepare: async (i) => {
                pluginDoc = (await M.lock(idSaveUnlock, OWNER)) as RowDoc;
                pluginDoc.n = 10 + i;
              },
              run: () => pluginDoc!.saveAndUnlock(),
            },
            raw: { prepare: async (i) => void (prepared = await rawLock(10 + i)), run: () => driver.send(commands, prepared) },
            control: { prepare: async (i) => void (prepared = await rawLock(10 + i)), run: () => driver.send(commands, prepared) },
            mongoose: { prepare: async (i) => void ((prepared = await rawLock()), (plain.n = 10 + i)), run: () => driver.send(commands, prepared, save) },
            floor: { prepare: async (i) => void (prepared = await rawLock(10 + i)), run: () => replayer.send(commands, prepared) },
          },
          { ...sizes, rawSide, mongooseSide: 'the document write: doc.save() of a model without the plugin' },
        ),
      );
    }

    // ---- guarded updateOne -------------------------------------------------------------------
    for (const [label, id, options] of [
      ['guarded updateOne({ _id }, { $inc }, { lockOwner }) by the holder', idUpdateHeld, { lockOwner: OWNER }],
      ['guarded updateOne({ _id }, { $inc }), nobody holds the document', idUpdateFree, {}],
    ] as const) {
      console.log(`[bench] 1b. identical commands: ${label}`);
      if ('lockOwner' in options) await M.lock(id, OWNER);
      else await (await M.lock(id, OWNER)).unlock(); // leaves a released lock record
      const write = () => M.updateOne({ _id: id }, { $inc: { n: 1 } }, options).exec();
      const recorded = await recordCommands(connection, write);
      const commands = replayable(recorded);
      const claims = recordedTokens(recorded);
      const update = new Map([[indexOf(recorded, 'update'), (session: ClientSession | undefined) => Plain.updateOne({ _id: id }, { $inc: { n: 1 } }, session ? { session } : {}).exec()]]);
      const pluginSent = await recordCommands(connection, write);
      assertSameCommands(label, pluginSent, await recordCommands(connection, () => driver.send(commands, cycleBodies(commands, claims))));
      assertSameCommands(`${label} (floor)`, pluginSent, await recordCommands(connection, () => replayer.send(commands, cycleBodies(commands, claims))));
      assertSameCommands(`${label} (Mongoose side)`, pluginSent, asGuarded(await recordCommands(connection, () => driver.send(commands, cycleBodies(commands, claims), update))));
      let prepared: Document[] = [];
      const prepare = () => void (prepared = cycleBodies(commands, claims));
      results.push(
        await compare(
          label,
          names(recorded),
          {
            plugin: { run: write },
            raw: { prepare, run: () => driver.send(commands, prepared) },
            mongoose: { prepare, run: () => driver.send(commands, prepared, update) },
            floor: { prepare, run: () => replayer.send(commands, prepared) },
            control: { prepare, run: () => driver.send(commands, prepared) },
          },
          { ...sizes, rawSide, mongooseSide: 'the document write: Model.updateOne() of a model without the plugin' },
        ),
      );
      if ('lockOwner' in options) await M.forceUnlock(id);
    }
  } finally {
    await replayer.end();
  }
  return results;
}
