/**
 * The plugin against the raw driver sending the identical commands (issue 16, Performance).
 *
 * One plugin operation is recorded on the wire (command monitoring) and replayed with
 * `db.command`, so the difference is the plugin's own client-side cost (argument checks, hashing,
 * building the commands, Mongoose's casting and hydration, the guard's bookkeeping). The replay is
 * made to be the same commands, not merely the same command names:
 *  - the driver's envelope is its own (`lsid`, `$clusterTime`, `$db`), on one explicit session;
 *  - a retryable write (the plugin's acquire and release carry a `txnNumber`: the driver's
 *    retryable writes) is sent with a `txnNumber` of its own on that session, so the server does
 *    the same retryable-write bookkeeping for both;
 *  - the commands of a transaction (`startTransaction` / `autocommit: false`, then
 *    `commitTransaction`) are sent in a transaction of that session (`startTransaction()`,
 *    `db.command(..., { session })`, `commitTransaction()`), which gives them the same fields;
 *  - every random value of the recording (acquisition tokens, claim values) and every value the
 *    benchmark varies (a saved field) is replaced per cycle, so neither side repeats a command
 *    or makes a write a no-op; the replacement is done before the cycle's timer starts.
 * `checkIdentical` compares the replay's commands with the plugin's, field by field, once before
 * timing: a replay that differs (another field, another value) stops the benchmark.
 *
 * The sides run interleaved in short blocks (`compare`), so load from other processes hits all
 * alike, in several rounds; each round gives ratios of p50, of the mean and of the process's
 * CPU time per operation (the emulator runs in this process: CPU time is the client's and the
 * server's), and the spread over rounds is reported with them.
 */
import { randomBytes } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { mongo, type Connection } from 'mongoose';
import type { ClientSession, Db, Document } from 'mongodb';

const IGNORED = new Set(['hello', 'isMaster', 'ismaster', 'ping', 'endSessions', 'getMore']);
/** The driver's envelope of a command: added by the driver to whatever it sends. */
const ENVELOPE = ['lsid', '$clusterTime', '$db', 'txnNumber', 'startTransaction', 'autocommit', '$readPreference'];

/** Full command documents sent (other than handshake and monitoring) while `fn` runs. */
export async function recordCommands(connection: Connection, fn: () => Promise<unknown>): Promise<Document[]> {
  const seen: Document[] = [];
  const listener = (event: { commandName: string; command: Document }) => {
    if (!IGNORED.has(event.commandName)) seen.push(event.command);
  };
  connection.getClient().on('commandStarted', listener);
  try {
    await fn();
  } finally {
    connection.getClient().off('commandStarted', listener);
  }
  return seen;
}

/** A recorded command without the driver's envelope, ready for db.command. */
export function stripEnvelope(command: Document): Document {
  const rest: Document = {};
  for (const [key, value] of Object.entries(command)) if (!ENVELOPE.includes(key)) rest[key] = value;
  return rest;
}

/** A deep copy of `value` with every primitive found in `map` replaced (BSON values and dates kept). */
export function substitute(value: unknown, map: ReadonlyMap<unknown, unknown>): unknown {
  if (map.has(value)) return map.get(value);
  if (Array.isArray(value)) return value.map((v) => substitute(v, map));
  if (value === null || typeof value !== 'object' || (value as { _bsontype?: string })._bsontype || value instanceof Date) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = substitute(v, map);
  return out;
}

/** A fresh value of the plugin's random tokens' form (16 random bytes, base64url). */
export const freshToken = (): string => randomBytes(16).toString('base64url');

/** The form of the plugin's random tokens (lock-store.ts, newLockToken). */
const TOKEN = /^[A-Za-z0-9_-]{22}$/;

/** Every string of the recording that looks like one of the plugin's random tokens, in order of first appearance. */
export function recordedTokens(commands: Document[]): string[] {
  const found = new Set<string>();
  const walk = (value: unknown): void => {
    if (typeof value === 'string' && TOKEN.test(value)) found.add(value);
    else if (Array.isArray(value)) value.forEach(walk);
    else if (value !== null && typeof value === 'object' && !(value as { _bsontype?: string })._bsontype && !(value instanceof Date)) Object.values(value).forEach(walk);
  };
  commands.forEach(walk);
  return [...found];
}

/** Recorded commands as the replay sends them: stripped, and how each must be sent. */
export interface ReplayCommand {
  body: Document;
  /** A retryable write: sent with a txnNumber of the replay's session. */
  retryable: boolean;
  /** Starts a transaction on the replay's session (the first command of one). */
  startsTransaction: boolean;
  /** Inside a transaction (`autocommit: false`). */
  inTransaction: boolean;
  /** `commitTransaction`: commits the replay's transaction. */
  commits: boolean;
}

export function replayable(recorded: Document[]): ReplayCommand[] {
  return recorded.map((command) => ({
    body: stripEnvelope(command),
    retryable: command.txnNumber !== undefined && command.autocommit === undefined,
    startsTransaction: command.startTransaction === true,
    inTransaction: command.autocommit === false,
    commits: 'commitTransaction' in command,
  }));
}

/** Sends replayed commands on one explicit session, as the driver sent the recorded ones. */
export class Replayer {
  private readonly session: ClientSession;
  private txnNumber: number;

  constructor(private readonly db: Db, client: Connection) {
    // Not causally consistent: the driver's implicit sessions (the plugin's) are not, and an
    // explicit session would add `readConcern: { afterClusterTime }` to every read.
    this.session = client.getClient().startSession({ causalConsistency: false }) as unknown as ClientSession;
    // Above every txnNumber the pool's server sessions used so far (the server refuses going back).
    this.txnNumber = 1_000_000_000;
  }

  /**
   * Sends `commands` with `bodies`; `instead` replaces the command at an index by a function run
   * on the replay's session at that point (in its transaction, if the command was in one).
   */
  async send(commands: ReplayCommand[], bodies: Document[], instead?: ReadonlyMap<number, (session: ClientSession) => Promise<unknown>>): Promise<void> {
    for (const [i, command] of commands.entries()) {
      const body = bodies[i]!;
      const own = instead?.get(i);
      if (own) {
        if (command.startsTransaction) this.session.startTransaction();
        await own(this.session);
      } else if (command.commits) {
        await this.session.commitTransaction();
      } else if (command.inTransaction) {
        if (command.startsTransaction) this.session.startTransaction();
        await this.db.command(body, { session: this.session });
      } else if (command.retryable) {
        await this.db.command({ ...body, txnNumber: mongo.Long.fromNumber(++this.txnNumber) }, { session: this.session });
      } else {
        await this.db.command(body, { session: this.session });
      }
    }
  }

  async end(): Promise<void> {
    await this.session.endSession();
  }
}

/**
 * Sends replayed commands as a user of the raw driver's API sends them: each through the
 * collection method that produces exactly that command (`findOneAndUpdate`, `findOne`,
 * `updateOne`), so the driver does its per-operation work as it does for any application: an
 * implicit session per operation outside a transaction (executeOperation starts and ends one),
 * the retryable write's `txnNumber` taken from that session (sessions.js, applySession), the
 * retry wrapper; and a transaction on a session of its own (startSession, startTransaction,
 * commitTransaction, endSession), since a session holds one transaction at a time and an
 * application serving concurrent requests cannot share one. The plugin's acquire, load and release
 * and the guard's transaction (guard/transaction.ts, a session per guarded write) do exactly that.
 * `Replayer` above (`db.command` on one long-lived explicit session, `txnNumber` set by hand) skips
 * that work: it is the floor no application reaches through the driver, reported beside.
 */
export class DriverReplayer {
  private session: ClientSession | undefined;

  constructor(private readonly db: Db, private readonly client: Connection) {}

  /** As Replayer.send; `instead` gets the transaction's session, or none outside a transaction. */
  async send(commands: ReplayCommand[], bodies: Document[], instead?: ReadonlyMap<number, (session: ClientSession | undefined) => Promise<unknown>>): Promise<void> {
    for (const [i, command] of commands.entries()) {
      if (command.startsTransaction) {
        this.session = this.client.getClient().startSession() as unknown as ClientSession;
        this.session.startTransaction({ readPreference: 'primary' });
      }
      const session = command.inTransaction ? this.session : undefined;
      const own = instead?.get(i);
      if (own) await own(session);
      else if (command.commits) await this.session!.commitTransaction();
      else await this.sendOne(bodies[i]!, session);
      if (command.commits) {
        await this.session!.endSession();
        this.session = undefined;
      }
    }
  }

  /** One command through the collection method that sends it (any other field: refused, so a replay never differs silently). */
  private async sendOne(body: Document, session: ClientSession | undefined): Promise<void> {
    const [name] = Object.keys(body);
    const extra = (allowed: string[]) => Object.keys(body).filter((k) => !allowed.includes(k));
    const refuse = (fields: string[]) => {
      if (fields.length) throw new Error(`bench: DriverReplayer has no driver method for ${name} with ${fields.join(', ')}`);
    };
    const options = session ? { session } : {};
    if (name === 'findAndModify') {
      refuse(extra(['findAndModify', 'query', 'update', 'upsert', 'new', 'fields', 'remove']));
      if (body.remove) refuse(['remove: true']);
      await this.db.collection(body.findAndModify as string).findOneAndUpdate(body.query as Document, body.update as Document[], {
        ...options,
        upsert: body.upsert === true,
        returnDocument: body.new ? 'after' : 'before',
        ...(body.fields ? { projection: body.fields as Document } : {}),
      });
    } else if (name === 'find') {
      refuse(extra(['find', 'filter', 'limit', 'singleBatch']));
      if (body.limit !== 1 || body.singleBatch !== true) refuse(['limit/singleBatch other than findOne']);
      await this.db.collection(body.find as string).findOne(body.filter as Document, options);
    } else if (name === 'update') {
      refuse(extra(['update', 'updates', 'ordered']));
      const updates = body.updates as Document[];
      if (updates.length !== 1) refuse(['several statements']);
      const { q, u, upsert, multi, ...rest } = updates[0]!;
      refuse(Object.keys(rest).map((k) => `updates.${k}`));
      if (multi) refuse(['multi']);
      await this.db.collection(body.update as string).updateOne(q as Document, u as Document, { ...options, ...(upsert !== undefined ? { upsert: upsert as boolean } : {}) });
    } else {
      refuse([name ?? 'an empty command']);
    }
  }
}

/**
 * What the server receives of a command, without what legitimately differs between two runs: the
 * session id, the cluster time, the txnNumber's value, and the random tokens (each replaced by
 * its position of first appearance, so a token used twice must be used twice on both sides).
 */
function comparable(commands: Document[]): Document[] {
  const tokens = new Map<string, string>();
  const walk = (value: unknown): unknown => {
    if (typeof value === 'string' && TOKEN.test(value)) {
      if (!tokens.has(value)) tokens.set(value, `<token ${tokens.size}>`);
      return tokens.get(value);
    }
    if (Array.isArray(value)) return value.map(walk);
    if (value === null || typeof value !== 'object' || (value as { _bsontype?: string })._bsontype || value instanceof Date) return value;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = walk(v);
    return out;
  };
  return commands.map(({ lsid: _lsid, $clusterTime: _clusterTime, txnNumber, ...rest }) => ({ ...(walk(rest) as Document), txnNumber: txnNumber === undefined ? undefined : '<present>' }));
}

/** Throws unless two recordings are the same commands (see `comparable`). */
export function assertSameCommands(what: string, pluginSent: Document[], replaySent: Document[]): void {
  const expected = comparable(pluginSent);
  const actual = comparable(replaySent);
  if (expected.length !== actual.length || expected.some((c, i) => !isDeepStrictEqual(c, actual[i]))) {
    throw new Error(`bench: the replay of ${what} is not the plugin's commands.\nplugin: ${JSON.stringify(expected)}\nreplay: ${JSON.stringify(actual)}`);
  }
}

/**
 * Checks that the replay sends the plugin's commands: `pluginOp` and `replayOp` each perform one
 * operation (with the same values, tokens aside).
 */
export async function checkIdentical(connection: Connection, what: string, pluginOp: () => Promise<unknown>, replayOp: () => Promise<unknown>): Promise<void> {
  assertSameCommands(what, await recordCommands(connection, pluginOp), await recordCommands(connection, replayOp));
}

/** Per side of a comparison: p50 and mean latency (ms) and process CPU time (user + system, ms) per operation. */
export interface SideStats {
  p50: number;
  mean: number;
  cpu: number;
}

/** One round: each side's figures, and the plugin's ratios to the raw replay (and to the Mongoose side, if any). */
export interface RoundResult {
  plugin: SideStats;
  raw: SideStats;
  /** The plugin's commands with Mongoose doing its own part (the load, the save, the update) and the raw driver the rest. */
  mongoose?: SideStats;
  /** The same commands by `db.command` on one long-lived session (Replayer): the floor no application reaches. */
  floor?: SideStats;
  /** The plugin against the floor. */
  floorRatio?: SideStats;
  ratio: SideStats;
  /** The Mongoose side against the raw replay: Mongoose's share of the plugin's ratio. */
  mongooseRatio?: SideStats;
  /** A second copy of the raw side (compare's `control`). */
  control?: SideStats;
  /** A/A: the control side against the raw side, which a fair round puts at 1.00x. */
  aaRatio?: SideStats;
}

export interface Spread {
  median: number;
  min: number;
  max: number;
}

export interface ReplayComparison {
  operation: string;
  /** How the sides were interleaved (`compare`). */
  schedule?: Schedule;
  /** The commands of one operation, as replayed. */
  commands: string[];
  /** What the Mongoose side does with Mongoose, when there is one. */
  mongooseSide?: string;
  cycles: number;
  rounds: RoundResult[];
  /** The plugin against the raw replay, over rounds. */
  ratioP50: Spread;
  ratioMean: Spread;
  ratioCpu: Spread;
  /** The Mongoose side against the raw replay, over rounds. */
  mongooseRatioP50?: Spread;
  mongooseRatioCpu?: Spread;
  /** What the raw side is (see DriverReplayer and Replayer). */
  rawSide?: string;
  /** The plugin against the floor (db.command on one long-lived session), over rounds. */
  floorRatioP50?: Spread;
  floorRatioCpu?: Spread;
  /** A/A: the control side against the raw side, over rounds. */
  aaRatioP50?: Spread;
  /** The warm-up's criterion, its rounds (in order; the first is the coldest) and whether it was met. */
  settle?: Settle;
  warmupRounds?: RoundResult[];
  settled?: boolean;
}

/** One timed side of a comparison: `prepare` (untimed) then `run` (timed) per cycle. */
export interface Side {
  prepare?: (i: number) => Promise<void> | void;
  run: (i: number) => Promise<unknown>;
}

const round = (x: number, digits = 3) => Math.round(x * 10 ** digits) / 10 ** digits;

function spread(values: number[]): Spread {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return { median: round(median, 2), min: round(sorted[0]!, 2), max: round(sorted[sorted.length - 1]!, 2) };
}

function stats(times: number[], cpu: number): SideStats {
  const sorted = [...times].sort((a, b) => a - b);
  return { p50: round(sorted[Math.ceil(sorted.length / 2) - 1]!), mean: round(times.reduce((a, b) => a + b, 0) / times.length), cpu: round(cpu / times.length) };
}

const ratioOf = (a: SideStats, b: SideStats): SideStats => ({ p50: round(a.p50 / b.p50), mean: round(a.mean / b.mean), cpu: round(a.cpu / b.cpu) });

/** Timed cycles of one side in a row (`compare`'s blocks). */
export const BLOCK = 16;

/**
 * How `compare` interleaves the sides: `blocks` (the default) or `rotate` (the method used before,
 * kept to reproduce its figures: BENCH_REPLAY_SCHEDULE=rotate).
 */
export type Schedule = 'blocks' | 'rotate';

export const scheduleFromEnv = (): Schedule => (process.env.BENCH_REPLAY_SCHEDULE === 'rotate' ? 'rotate' : 'blocks');

/**
 * When the warm-up ends (`compare`'s `settle`): untimed-for-the-result rounds, run exactly as the
 * timed ones, until the last `window` rounds' medians of the plugin/raw ratio of p50s and of the
 * A/A ratio (the control side, a second copy of the raw side, against the raw side) each differ by
 * at most `tolerance` from the medians of the `window` rounds before them. A weak detector (rounds
 * move by about 0.03 with the machine's load, the tolerance is 0.01): in effect a minimum of two
 * windows plus a noisy drift check. It can stop while the ratio still falls (which only makes the
 * plugin look worse) or not stop on a flat series; the evidence that the code is warm is that the
 * timed rounds after it show no trend (docs/evidence.md). At most `maxRounds` such rounds; a
 * comparison that did not settle says so (`settled: false`).
 */
export interface Settle {
  window: number;
  tolerance: number;
  maxRounds: number;
}

const medianOf = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/** Whether the warm-up rounds so far meet `settle`'s criterion (see Settle). */
export function hasSettled(rounds: RoundResult[], settle: Settle): boolean {
  const w = settle.window;
  if (rounds.length < 2 * w) return false;
  const last = rounds.slice(-w);
  const before = rounds.slice(-2 * w, -w);
  const drift = (of: (r: RoundResult) => number | undefined) => {
    const a = last.map(of);
    const b = before.map(of);
    if (a.some((x) => x === undefined) || b.some((x) => x === undefined)) return 0;
    return Math.abs(medianOf(a as number[]) - medianOf(b as number[]));
  };
  return drift((r) => r.ratio.p50) <= settle.tolerance && drift((r) => r.aaRatio?.p50) <= settle.tolerance;
}

/**
 * Runs the sides interleaved: `warmup` untimed cycles, then (with `settle`) warm-up rounds until
 * the figures stop drifting, then `rounds` rounds of `cycles` per side.
 *
 * `blocks`: each side runs one untimed cycle, then BLOCK timed cycles in a row, then the next side
 * does the same, the order of the sides reversed every block (A B C D, D C B A, ...): a block lasts
 * about 10 ms, so load from other processes still hits every side alike, and every timed cycle
 * follows a cycle of its own side, so every side is timed equally warm.
 * `rotate`: every side once per cycle, the order rotating. Unfair, twice over: a rotation of a
 * fixed order has each side follow, nearly always, the same other side (the plugin the floor, the
 * raw side the plugin), and a side that follows another's code is slower; and the side whose code
 * the others do not share (the plugin's, with Mongoose's query and document code) runs one cycle in
 * four, while the driver's, which every side runs, stays warm in the CPU's caches. Measured with
 * the four sides of benchmark 1b timed both ways, interleaved in one process (bench/replay-method.ts;
 * docs/evidence.md, "How benchmark 1b interleaves"): A/A, a raw side against a second copy of
 * itself, 1.006x-1.013x under `rotate` in three runs, 0.998x-1.000x under `blocks`; the plugin
 * against the raw side 1.099x-1.124x under `rotate`, 1.067x-1.072x under `blocks`.
 * `control`: a second copy of the raw side, timed like the others; its ratio to the raw side (A/A)
 * is reported per round and must be about 1.00x for the round's other ratios to be read.
 */
export async function compare(
  operation: string,
  commands: string[],
  sides: { plugin: Side; raw: Side; mongoose?: Side; floor?: Side; control?: Side },
  options: { cycles: number; rounds: number; warmup: number; settle?: Settle; mongooseSide?: string; rawSide?: string; schedule?: Schedule },
): Promise<ReplayComparison> {
  const schedule = options.schedule ?? 'blocks';
  const names = (['plugin', 'raw', 'mongoose', 'floor', 'control'] as const).filter((name) => sides[name] !== undefined);
  let i = 0;
  const once = async (side: Side): Promise<{ ms: number; cpu: number }> => {
    const k = i++;
    await side.prepare?.(k);
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await side.run(k);
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    return { ms, cpu: (cpu.user + cpu.system) / 1000 };
  };
  const runRound = async (): Promise<RoundResult> => {
    const times: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
    const cpu: Record<string, number> = Object.fromEntries(names.map((n) => [n, 0]));
    const timed = async (name: (typeof names)[number]) => {
      const t = await once(sides[name]!);
      times[name]!.push(t.ms);
      cpu[name]! += t.cpu;
    };
    if (schedule === 'rotate') {
      for (let c = 0; c < options.cycles; c++) for (let k = 0; k < names.length; k++) await timed(names[(c + k) % names.length]!);
    } else {
      for (let b = 0, done = 0; done < options.cycles; b++, done += BLOCK) {
        for (const name of b % 2 ? [...names].reverse() : names) {
          await once(sides[name]!); // untimed: the block's first timed cycle follows one of its own side
          for (let c = done; c < Math.min(options.cycles, done + BLOCK); c++) await timed(name);
        }
      }
    }
    const plugin = stats(times.plugin!, cpu.plugin!);
    const raw = stats(times.raw!, cpu.raw!);
    const mongoose = sides.mongoose ? stats(times.mongoose!, cpu.mongoose!) : undefined;
    const floor = sides.floor ? stats(times.floor!, cpu.floor!) : undefined;
    const control = sides.control ? stats(times.control!, cpu.control!) : undefined;
    return {
      plugin,
      raw,
      ...(mongoose ? { mongoose } : {}),
      ...(floor ? { floor } : {}),
      ...(control ? { control } : {}),
      ratio: ratioOf(plugin, raw),
      ...(mongoose ? { mongooseRatio: ratioOf(mongoose, raw) } : {}),
      ...(floor ? { floorRatio: ratioOf(plugin, floor) } : {}),
      ...(control ? { aaRatio: ratioOf(control, raw) } : {}),
    };
  };
  for (let w = 0; w < options.warmup; w++) for (const name of names) await once(sides[name]!);
  const warmupRounds: RoundResult[] = [];
  if (options.settle) {
    while (warmupRounds.length < options.settle.maxRounds && !hasSettled(warmupRounds, options.settle)) warmupRounds.push(await runRound());
  }
  const rounds: RoundResult[] = [];
  for (let r = 0; r < options.rounds; r++) rounds.push(await runRound());
  const withMongoose = rounds.every((r) => r.mongooseRatio);
  const withFloor = rounds.every((r) => r.floorRatio);
  return {
    operation,
    schedule,
    commands,
    ...(options.mongooseSide ? { mongooseSide: options.mongooseSide } : {}),
    cycles: options.cycles,
    rounds,
    ratioP50: spread(rounds.map((r) => r.ratio.p50)),
    ratioMean: spread(rounds.map((r) => r.ratio.mean)),
    ratioCpu: spread(rounds.map((r) => r.ratio.cpu)),
    ...(withMongoose ? { mongooseRatioP50: spread(rounds.map((r) => r.mongooseRatio!.p50)), mongooseRatioCpu: spread(rounds.map((r) => r.mongooseRatio!.cpu)) } : {}),
    ...(options.rawSide ? { rawSide: options.rawSide } : {}),
    ...(withFloor ? { floorRatioP50: spread(rounds.map((r) => r.floorRatio!.p50)), floorRatioCpu: spread(rounds.map((r) => r.floorRatio!.cpu)) } : {}),
    ...(rounds.every((r) => r.aaRatio) ? { aaRatioP50: spread(rounds.map((r) => r.aaRatio!.p50)) } : {}),
    ...(options.settle ? { settle: options.settle, warmupRounds, settled: hasSettled(warmupRounds, options.settle) } : {}),
  };
}

/** What lockUnlockReplay needs of a model with the plugin: lock, and the load as findOne + hydrate. */
interface LockUnlockModel {
  lock(id: unknown, owner: string): Promise<{ unlock(): Promise<unknown> }>;
  hydrate(doc: unknown): unknown;
  collection: { findOne(filter: Document, options: { readPreference: 'primary' }): Promise<unknown> };
}

/**
 * Benchmark 1b's lock + unlock of `id`, for the scripts that study its method (replay-warmup,
 * replay-method, replay-calibrate): the plugin's cycle, its recorded commands, and
 * the index of the load (`find`) among them, and `replaySide(send)`, a side that replays them with fresh tokens every cycle through `driver` (the
 * raw side; with `load`, the Mongoose side: the load as findOne + hydrate) or `replayer` (the floor).
 */
export async function lockUnlockReplay(connection: Connection, db: Db, model: LockUnlockModel, id: unknown) {
  const cycle = async (): Promise<void> => void (await (await model.lock(id, 'bench-owner')).unlock());
  const recorded = await recordCommands(connection, cycle);
  const commands = replayable(recorded);
  const tokens = recordedTokens(recorded);
  const bodies = () => {
    const map = new Map<unknown, unknown>(tokens.map((t) => [t, freshToken()]));
    return commands.map((c) => substitute(c.body, map) as Document);
  };
  const driver = new DriverReplayer(db, connection);
  const replayer = new Replayer(db, connection);
  const find = recorded.findIndex((c) => Object.keys(c)[0] === 'find');
  const load = new Map([[find, async () => model.hydrate(await model.collection.findOne({ _id: id }, { readPreference: 'primary' }))]]);
  const replaySide = (send: (prepared: Document[]) => Promise<unknown>): Side => {
    let prepared: Document[] = [];
    return { prepare: () => void (prepared = bodies()), run: () => send(prepared) };
  };
  return { cycle, commands, find, driver, replayer, load, replaySide };
}
