/**
 * Replays a schedule from the model (schedule.ts) against the real plugin: one Mongoose connection
 * per model client, each through its own gate (gate.ts), so that every command the model orders
 * reaches the server, and every reply the client, exactly at its step.
 *
 * Each step does what the model's event says (Model.lock, extendLock, unlock, a resume with the
 * ticket, Model.unlock, forceUnlock, a guarded save or saveAndUnlock, an anonymous updateOne) and
 * checks that the server and the plugin decided as the model did (granted or refused, extended or
 * not, handed out or not, the guard's check passed or not). A write the model does not know of (a
 * lock call asking again after a grant arrived too late, the release after an extension that came
 * too late) is answered at the gate with an error, so the run stays the model's.
 *
 * The outcome is judged apart from the plugin, from the server's history: a change stream on the
 * lock collection and on the documents (post-images, changeStreamPreAndPostImages), read after
 * the run, and what each client believed (`heldLock().msLeft()` when a lock was handed out, until
 * the holder gave it up or learned that it was gone):
 *  - LEASE: while a client believed it held an acquisition, the server's record carried that
 *    token and had not expired, unless another request ended it (forceUnlock, Model.unlock,
 *    a renewal by the same owner, a release by another instance of the acquisition);
 *  - MUTEX: no two owners believed at once (follows from LEASE on one record; checked too);
 *  - windows (guarded writes without transactions): a write that landed after another
 *    acquisition, whose holder had already loaded the document, is a window; the model says at
 *    each landing whether it is one (`land window=k`), and the real run must agree.
 */
import { MongoClient, type ChangeStreamDocument, type Db, type Document as MongoDocument } from 'mongodb';
import type { Connection, HydratedDocument } from 'mongoose';
import { LockedError, LockNotHeldError, type LockMethods } from '../../../src';
import { connectTo, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItem, type WorkItemModel } from '../../support/work-item';
import { openGate, type Gate, type Held, type HeldReply } from './gate';
import type { Step } from './schedule';

type Doc = HydratedDocument<WorkItem> & LockMethods;

export interface ReplayOptions {
  /** The server (a URI of one host). */
  uri: string;
  dbName: string;
  /** Model name shared by every client (one collection, one lock collection). */
  modelName: string;
  ttlMs: number;
  /** Real milliseconds per model tick (the model's `left=` in real time). */
  tickMs: number;
  /** Stop, rather than fail, where the code is more careful than the model (ConservativeStop). */
  stopWhenConservative?: boolean;
  /** The plugin's transactions option: 'never' for the guard's check mode. */
  transactions: 'auto' | 'never';
  /** Owner of each model client (core.pml: A, B, A). */
  owners: readonly string[];
}

interface Belief {
  client: number;
  token: string;
  from: number;
  until: number;
}

interface Forwarded {
  client: number;
  kind: string;
  token: string | undefined;
  at: number;
}

interface Landing {
  client: number;
  /** The model's verdict for this landing (0: no window; 1..4: the window kind). */
  window: number;
  /** When the guard's check ran (the call started) and when the write reached the server. */
  checkedAt: number;
  landedAt: number;
  title: string;
}

interface Client {
  index: number;
  owner: string;
  gate: Gate;
  conn: MonitoredConnection;
  model: WorkItemModel;
  /** Writes on watched collections this client may still send, in order; anything else fails. */
  expect: string[];
  call: Promise<unknown> | undefined;
  exec: Held | undefined;
  reply: HeldReply | undefined;
  doc: Doc | undefined;
  belief: Belief | undefined;
  checkedAt: number;
  title: string;
  /** Writes the gate refused because the model has no such step (in order). */
  refused: string[];
}

/**
 * The code gave back a grant the model hands out with its last tick(s) of lease: on a loaded
 * machine the reply and the load took longer in real time than the model's tick, and the code's
 * lease (timed from the send) ran out first. That is the code being more careful than the model,
 * not less; the rest of the schedule cannot be followed, so the replay stops there and the
 * history so far is judged.
 */
export class ConservativeStop extends Error {}

/** The token a findAndModify acquire carries in its pipeline ({ $literal } under $cond). */
function tokenOf(command: MongoDocument): string | undefined {
  const update = command.update as MongoDocument[] | undefined;
  const cond = update?.[0]?.$set?.token?.$cond as unknown[] | undefined;
  const literal = cond?.[1] as { $literal?: unknown } | undefined;
  return typeof literal?.$literal === 'string' ? literal.$literal : undefined;
}

/** The token an update's first statement filters on (a release by token), if any. */
function filterTokenOf(command: MongoDocument): string | undefined {
  const updates = command.updates as { q?: { token?: unknown } }[] | undefined;
  const token = updates?.[0]?.q?.token;
  return typeof token === 'string' ? token : undefined;
}

function grantedBy(reply: MongoDocument): boolean {
  const value = reply.value as MongoDocument | null | undefined;
  return value !== null && value !== undefined && (value.acquired === true || ('token' in value && !('acquired' in value)));
}

const settle = (p: Promise<unknown> | undefined): Promise<{ value?: unknown; error?: unknown }> =>
  (p ?? Promise.resolve(undefined)).then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );

export class Replay {
  private clients: Client[] = [];
  private id: unknown;
  private start = 0;
  private beliefs: Belief[] = [];
  /** What the model's clients believed (its `left=` in ticks), in real time: a variant's beliefs. */
  private modelBeliefs: Belief[] = [];
  private modelBelief = new Map<number, Belief>();
  private forwarded: Forwarded[] = [];
  private landings: Landing[] = [];
  private tokens = new Map<number, string>();
  private tickets = new Map<string, string>();
  private lastTicketA: string | undefined;
  private history: ChangeStreamDocument[] = [];
  private docHistory: ChangeStreamDocument[] = [];
  private streams: { close(): Promise<void> }[] = [];
  private admin!: MonitoredConnection;
  /** The history's own client: unmonitored, so its commands are not the plugin's (docs/lock-commands.json). */
  private raw!: MongoClient;
  private db!: Db;
  readonly log: string[] = [];

  constructor(private readonly options: ReplayOptions) {}

  private lockCollection(): string {
    return this.clients[0].model.lockModel().collection.collectionName;
  }

  private userCollection(): string {
    return this.clients[0].model.collection.collectionName;
  }

  async open(): Promise<void> {
    const url = new URL(this.options.uri);
    const [host, port] = url.host.split(',')[0].split(':');
    const pluginOptions = { ttl: this.options.ttlMs, transactions: this.options.transactions } as const;
    this.admin = await connectTo(this.options.uri, this.options.dbName);
    const adminModel = await workItemModel(this.admin.connection, pluginOptions, this.options.modelName);
    const watched = new Set([adminModel.collection.collectionName, adminModel.lockModel().collection.collectionName]);
    for (const [index, owner] of this.options.owners.entries()) {
      const gate = await openGate({ host, port: Number(port ?? 27017) }, () => watched);
      const gateUri = `mongodb://${gate.address}/?directConnection=true`;
      const conn = await connectTo(gateUri, this.options.dbName, { retryWrites: true });
      const model = await workItemModel(conn.connection, pluginOptions, this.options.modelName);
      const client: Client = { index, owner, gate, conn, model, expect: [], call: undefined, exec: undefined, reply: undefined, doc: undefined, belief: undefined, checkedAt: 0, title: '', refused: [] };
      gate.setPolicy((name) => {
        if (client.expect[0] === name) {
          client.expect.shift();
          return 'hold';
        }
        client.refused.push(name);
        return 'fail';
      });
      this.clients.push(client);
    }
    // The server's history, read after the run: post-images need changeStreamPreAndPostImages.
    this.raw = await MongoClient.connect(this.options.uri);
    this.db = this.raw.db(this.options.dbName);
    const db = this.db;
    for (const name of watched) await db.command({ collMod: name, changeStreamPreAndPostImages: { enabled: true } });
    const item = await adminModel.create({ title: 'start', status: 'open', edits: 0 });
    this.id = item._id;
    const lockStream = db.collection(adminModel.lockModel().collection.collectionName).watch([], { fullDocument: 'required' });
    const docStream = db.collection(adminModel.collection.collectionName).watch([], { fullDocument: 'required' });
    lockStream.on('change', (change) => this.history.push(change));
    docStream.on('change', (change) => this.docHistory.push(change));
    this.streams.push(lockStream, docStream);
    // A change stream captures from when its aggregate answered: both must show a marker first.
    await this.sync();
  }

  /** Writes a marker into both collections (no plugin involved) and waits until both streams saw it. */
  private async sync(): Promise<void> {
    const db = this.db;
    const marker = `mpl-replay-marker-${++this.markers}`;
    let round = 0;
    const seen = (events: ChangeStreamDocument[]) => events.some((e) => 'documentKey' in e && (e.documentKey as { _id: unknown })._id === marker);
    const deadline = Date.now() + 20_000;
    for (;;) {
      await db.collection(this.lockCollection()).updateOne({ _id: marker as never }, { $set: { at: new Date(0), round } }, { upsert: true });
      // A new value each round: a write that changes nothing makes no change event.
      await db.collection(this.userCollection()).updateOne({ _id: marker as never }, { $set: { title: marker, round: ++round } }, { upsert: true });
      const until = Date.now() + 1_000;
      while (!(seen(this.history) && seen(this.docHistory)) && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 25));
      if (seen(this.history) && seen(this.docHistory)) return;
      if (Date.now() > deadline) throw new Error('the change streams did not start');
    }
  }

  private markers = 0;

  async close(): Promise<void> {
    for (const stream of this.streams) await stream.close().catch(() => undefined);
    for (const client of this.clients) {
      await client.conn.close().catch(() => undefined);
      await client.gate.close();
    }
    await this.db.dropDatabase().catch(() => undefined);
    await this.raw.close();
    await this.admin.close();
  }

  private note(text: string): void {
    this.log.push(`${String(Date.now() - this.start).padStart(6)} ms  ${text}`);
  }

  private async waitUntil(at: number): Promise<void> {
    const delay = this.start + at - Date.now();
    if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
  }

  private endBelief(client: Client, at = Date.now()): void {
    if (client.belief) {
      client.belief.until = Math.min(client.belief.until, at);
      client.belief = undefined;
    }
  }

  private beginBelief(client: Client, doc: Doc): void {
    const held = doc.heldLock();
    if (!held) throw new Error(`client ${client.index}: a lock was handed out without heldLock()`);
    this.endBelief(client);
    const now = Date.now();
    client.belief = { client: client.index, token: held.token, from: now, until: now + held.msLeft() };
    this.beliefs.push(client.belief);
    client.doc = doc;
    if (client.owner === this.options.owners[0]) {
      this.lastTicketA = held.ticket;
      this.lastTicketToken = held.token;
    }
    this.tickets.set(held.token, held.ticket);
  }

  private async takeWrite(client: Client, name: string, collection: string): Promise<Held> {
    return client.gate.take((held) => held.name === name && held.collection === collection);
  }

  /** Forwards a held write and records it. */
  private async forward(client: Client, held: Held, kind: string, holdReply: boolean): Promise<HeldReply> {
    const token = tokenOf(held.command) ?? filterTokenOf(held.command);
    this.forwarded.push({ client: client.index, kind, token, at: Date.now() });
    return held.forward({ holdReply });
  }

  private mismatch(step: Step, detail: string): Error {
    return new Error(`the code did not decide as the model at "${step.raw}" (tick ${step.tick}): ${detail}\n${this.log.join('\n')}`);
  }

  /** Follows the model's own belief at a step (lock-granted, resume-granted, extend-reply, unlock-send). */
  private noteModelBelief(c: Client, step: Step): void {
    const now = Date.now();
    const current = this.modelBelief.get(c.index);
    const end = () => {
      if (current) current.until = Math.min(current.until, now);
      this.modelBelief.delete(c.index);
    };
    const left = step.args.left ?? 0;
    if (step.kind === 'lock-granted' || step.kind === 'resume-granted') {
      end();
      const token = step.kind === 'resume-granted' ? this.lastTicketToken ?? '' : this.tokens.get(step.args.tok) ?? '';
      const belief = { client: c.index, token, from: now, until: now + left * this.options.tickMs };
      this.modelBeliefs.push(belief);
      this.modelBelief.set(c.index, belief);
    } else if (step.kind === 'extend-reply' && current) {
      if (left > 0) current.until = now + left * this.options.tickMs;
      else end();
    } else if (step.kind === 'unlock-send' || step.kind === 'check-release' || (step.kind === 'check-verify' && step.args.ok !== 1)) {
      end();
    }
  }

  private lastTicketToken: string | undefined;

  async run(steps: readonly Step[]): Promise<void> {
    this.start = Date.now();
    for (const step of steps) {
      await this.waitUntil(step.at);
      this.note(step.raw);
      if (step.client === undefined) continue; // purge: the TTL monitor's own time (not forced)
      this.noteModelBelief(this.clients[step.client], step);
      try {
        await this.step(this.clients[step.client], step);
      } catch (error) {
        if (error instanceof ConservativeStop) await this.abandon();
        throw error;
      }
    }
    // Let every call settle (the model has ended them all).
    for (const client of this.clients) await settle(client.call);
  }

  /** Ends every call still in flight (held requests fail, held replies arrive), and waits for them. */
  private async abandon(): Promise<void> {
    for (const client of this.clients) {
      client.expect = [];
      client.exec?.fail();
      client.exec = undefined;
      client.reply?.deliver();
      client.reply = undefined;
      for (const held of client.gate.pending()) held.fail();
    }
    for (const client of this.clients) {
      await settle(client.call);
      client.call = undefined;
      this.endBelief(client);
    }
  }

  private async step(c: Client, step: Step): Promise<void> {
    const locks = this.lockCollection();
    const users = this.userCollection();
    const ok = step.args.ok === 1;
    const M = c.model;
    switch (step.kind) {
      case 'lock-send':
        c.expect = ['findAndModify'];
        c.call = M.lock(this.id as never, c.owner);
        c.exec = await this.takeWrite(c, 'findAndModify', locks);
        this.tokens.set(step.args.tok, tokenOf(c.exec.command) ?? '');
        return;
      case 'lock-exec':
        if (!c.exec) {
          // guard.pml has no separate send for this command: sent now
          await this.step(c, { ...step, kind: 'lock-send' });
        }
        c.reply = await this.forward(c, c.exec!, 'lock', true);
        c.exec = undefined;
        if (grantedBy(c.reply.reply) !== ok) throw this.mismatch(step, `the server ${ok ? 'refused' : 'granted'} the lock`);
        return;
      case 'lock-granted':
      case 'resume-granted': {
        c.reply!.deliver();
        c.reply = undefined;
        c.refused = [];
        const result = await settle(c.call);
        c.call = undefined;
        if (result.error && c.refused[0] === 'update' && (step.args.left ?? 0) <= 1 && this.options.stopWhenConservative) {
          // It tried to give the grant back by its token (LockStore.releaseHeld): its lease was over.
          throw new ConservativeStop(`the code gave back the grant at "${step.raw}" (tick ${step.tick}): its lease ran out in real time before the model's last tick`);
        }
        if (result.error) throw this.mismatch(step, `the call failed: ${String(result.error)}`);
        this.beginBelief(c, result.value as Doc);
        return;
      }
      case 'lock-late':
        // The plugin releases the late grant by its token (held until giveback-exec), then asks
        // again: that second request is not in the model, and fails at the gate.
        c.expect = ['update'];
        c.reply!.deliver();
        c.reply = undefined;
        c.exec = await this.takeWrite(c, 'update', locks);
        return;
      case 'giveback-exec': {
        await this.forward(c, c.exec!, 'giveback', false);
        c.exec = undefined;
        const result = await settle(c.call);
        c.call = undefined;
        if (!result.error) throw this.mismatch(step, 'a grant that arrived too late was handed out');
        return;
      }
      case 'lock-refused': {
        c.reply!.deliver();
        c.reply = undefined;
        const result = await settle(c.call);
        c.call = undefined;
        if (!(result.error instanceof LockedError)) throw this.mismatch(step, `expected LockedError, got ${String(result.error ?? 'a lock')}`);
        return;
      }
      case 'extend-send':
        c.expect = ['findAndModify'];
        c.call = c.doc!.extendLock();
        c.exec = await this.takeWrite(c, 'findAndModify', locks);
        // startExtension: the lease counts on no more than the extension gives
        if (c.belief) c.belief.until = Math.min(c.belief.until, Date.now() + (c.doc!.heldLock()?.msLeft() ?? 0));
        return;
      case 'extend-exec':
        c.reply = await this.forward(c, c.exec!, 'extend', true);
        c.exec = undefined;
        if ((c.reply.reply.value != null) !== ok) throw this.mismatch(step, `the server ${ok ? 'did not extend' : 'extended'} the lock`);
        return;
      case 'extend-reply': {
        c.reply!.deliver();
        c.reply = undefined;
        const result = await settle(c.call);
        c.call = undefined;
        if (step.args.left > 0) {
          if (result.error) throw this.mismatch(step, `the extension failed: ${String(result.error)}`);
          if (c.belief) c.belief.until = Date.now() + (c.doc!.heldLock()?.msLeft() ?? 0);
        } else {
          if (!result.error) throw this.mismatch(step, 'an extension the model gives up succeeded');
          this.endBelief(c);
        }
        return;
      }
      case 'unlock-send':
        c.expect = ['update'];
        this.endBelief(c);
        c.call = c.doc!.unlock();
        c.exec = await this.takeWrite(c, 'update', locks);
        return;
      case 'unlock-exec':
        await this.forward(c, c.exec!, 'unlock', false);
        c.exec = undefined;
        await settle(c.call);
        c.call = undefined;
        return;
      case 'resume-send':
        c.expect = ['findAndModify'];
        c.call = M.lock(this.id as never, c.owner, { resume: this.lastTicketA! });
        c.exec = await this.takeWrite(c, 'findAndModify', locks);
        return;
      case 'resume-exec':
        c.reply = await this.forward(c, c.exec!, 'resume', true);
        c.exec = undefined;
        if ((c.reply.reply.value != null) !== ok) throw this.mismatch(step, `the server ${ok ? 'refused' : 'granted'} the resume`);
        return;
      case 'resume-not-granted': {
        c.reply!.deliver();
        c.reply = undefined;
        const result = await settle(c.call);
        c.call = undefined;
        if (!result.error) throw this.mismatch(step, 'a resume the model does not hand out was handed out');
        return;
      }
      case 'unlock-owner-send':
      case 'force-send':
        c.expect = ['update'];
        c.call = step.kind === 'force-send' ? M.forceUnlock(this.id as never) : M.unlock(this.id as never, c.owner);
        c.exec = await this.takeWrite(c, 'update', locks);
        return;
      case 'unlock-owner-exec':
      case 'force-exec':
        if (!c.exec) await this.step(c, { ...step, kind: step.kind === 'force-exec' ? 'force-send' : 'unlock-owner-send' });
        await this.forward(c, c.exec!, step.kind === 'force-exec' ? 'force' : 'unlock-owner', false);
        c.exec = undefined;
        await settle(c.call);
        c.call = undefined;
        return;
      // ---- guard.pml, check mode ----
      case 'check-verify': {
        const doc = c.doc!;
        c.title = `c${c.index}-t${step.args.tok}`;
        doc.title = c.title;
        doc.edits += 1;
        c.expect = step.args.rel === 1 ? ['update', 'update'] : ['update'];
        c.checkedAt = Date.now();
        c.call = step.args.rel === 1 ? doc.saveAndUnlock() : doc.save();
        if (!ok) {
          const result = await settle(c.call);
          c.call = undefined;
          if (!(result.error instanceof LockNotHeldError)) throw this.mismatch(step, `the guard let the write through (${String(result.error)})`);
          this.endBelief(c);
          return;
        }
        c.exec = await Promise.race([
          this.takeWrite(c, 'update', users),
          settle(c.call).then((r) => {
            throw this.mismatch(step, `the guard refused the write: ${String(r.error)}`);
          }),
        ]);
        return;
      }
      case 'check-blocking': {
        c.title = `anon-c${c.index}`;
        c.expect = ['update'];
        c.checkedAt = Date.now();
        c.call = M.updateOne({ _id: this.id }, { $set: { title: c.title } });
        if (!ok) {
          const result = await settle(c.call);
          c.call = undefined;
          if (!(result.error instanceof LockedError)) throw this.mismatch(step, `the guard let the write through (${String(result.error)})`);
          return;
        }
        c.exec = await Promise.race([
          this.takeWrite(c, 'update', users),
          settle(c.call).then((r) => {
            throw this.mismatch(step, `the guard refused the write: ${String(r.error)}`);
          }),
        ]);
        return;
      }
      case 'check-write':
      case 'check-write-anon': {
        const reply = await this.forward(c, c.exec!, 'write', false);
        c.exec = undefined;
        this.pendingLanding = { client: c.index, window: -1, checkedAt: c.checkedAt, landedAt: reply.at, title: c.title };
        if (c.expect.length === 0) {
          await settle(c.call);
          c.call = undefined;
        } else {
          c.exec = await this.takeWrite(c, 'update', locks); // saveAndUnlock's release, at check-release
        }
        return;
      }
      case 'land':
        if (!this.pendingLanding || this.pendingLanding.client !== c.index) throw new Error(`land without a write: ${step.raw}`);
        this.pendingLanding.window = step.args.window;
        this.landings.push(this.pendingLanding);
        this.pendingLanding = undefined;
        return;
      case 'check-release':
        this.endBelief(c);
        await this.forward(c, c.exec!, 'release', false);
        c.exec = undefined;
        await settle(c.call);
        c.call = undefined;
        return;
      default:
        throw new Error(`the replay does not know the model event "${step.raw}"`);
    }
  }

  private pendingLanding: Landing | undefined;

  /**
   * The independent checks (see the module comment). Returns the violations found; the caller
   * decides which the model expects.
   */
  async judge(): Promise<{ lease: string[]; mutex: string[]; windows: string[]; grants: number; modelLease: string[] }> {
    await this.sync();
    // Per token: when the server granted it, and when it stopped being current (released, taken
    // over, or expired by its last expiresAt).
    interface Span {
      token: string;
      /** The client whose lock call the server granted it to. */
      client: number | undefined;
      grantedAt: number;
      endedAt: number;
      endedBy: string;
    }
    const spans: Span[] = [];
    let current: Span | undefined;
    for (const event of this.history) {
      if (!('documentKey' in event) || String((event.documentKey as { _id: unknown })._id).startsWith('mpl-replay-marker')) continue;
      const wall = (event as { wallTime?: Date }).wallTime?.getTime() ?? 0;
      const doc = (event as { fullDocument?: MongoDocument }).fullDocument;
      const token = doc?.token as string | null | undefined;
      const expiresAt = (doc?.expiresAt as Date | undefined)?.getTime();
      if (current && token === current.token && expiresAt !== undefined) {
        current.endedAt = expiresAt; // an extension, a resume, or a guard's claim
        continue;
      }
      if (current) {
        // Ended by this change, unless it had expired before it (then a takeover of an expired lock).
        if (wall < current.endedAt) {
          current.endedAt = wall;
          current.endedBy = this.endedBy(wall, current, doc);
        }
        current = undefined;
      }
      if (typeof token === 'string' && expiresAt !== undefined) {
        const grantedBy = this.forwarded.find((f) => f.token === token)?.client;
        current = { token, client: grantedBy, grantedAt: wall, endedAt: expiresAt, endedBy: 'expiry' };
        spans.push(current);
      }
    }
    const slack = 5; // milliseconds: the server's dates are whole milliseconds
    const leaseOf = (beliefs: readonly Belief[], tolerance: number): string[] => {
      const found: string[] = [];
      for (const belief of beliefs) {
        const span = spans.find((s) => s.token === belief.token);
        if (!span) {
          found.push(`client ${belief.client} believed in ${belief.token} (${belief.from}..${belief.until}), which the server never granted`);
          continue;
        }
        const excused = span.endedBy.startsWith('other:') || (span.endedBy.startsWith('self:') && span.endedBy !== `self:${belief.client}`);
        if (belief.until > span.endedAt + tolerance && !excused) {
          found.push(`client ${belief.client} believed in ${belief.token} until ${belief.until - this.start} ms; the server's grant ended at ${span.endedAt - this.start} ms (${span.endedBy})`);
        }
        if (belief.from < span.grantedAt - slack) found.push(`client ${belief.client} believed in ${belief.token} from ${belief.from - this.start} ms, before the server granted it at ${span.grantedAt - this.start} ms`);
      }
      return found;
    };
    const lease = leaseOf(this.beliefs, slack);
    // The model's beliefs are whole ticks placed at a step's offset within its tick: only an excess
    // of more than half a tick is the model's own (a variant's counterexample exceeds by ticks).
    const modelLease = leaseOf(this.modelBeliefs, this.options.tickMs / 2);
    const mutex: string[] = [];
    for (const a of this.beliefs) {
      for (const b of this.beliefs) {
        if (a.client >= b.client || this.options.owners[a.client] === this.options.owners[b.client]) continue;
        const overlap = Math.min(a.until, b.until) - Math.max(a.from, b.from);
        const spanA = spans.find((s) => s.token === a.token);
        const spanB = spans.find((s) => s.token === b.token);
        const endedByOther = (span: { endedBy: string } | undefined, client: number) => span !== undefined && (span.endedBy.startsWith('other:') || (span.endedBy.startsWith('self:') && span.endedBy !== `self:${client}`));
        const excused = endedByOther(spanA, a.client) || endedByOther(spanB, b.client);
        if (overlap > slack && !excused) mutex.push(`clients ${a.client} and ${b.client} both believed for ${overlap} ms`);
      }
    }
    // Windows: a write that landed after another acquisition was handed out following its check.
    const windows: string[] = [];
    for (const landing of this.landings) {
      const write = this.docHistory.find((e) => (e as { fullDocument?: MongoDocument }).fullDocument?.title === landing.title);
      const landedAt = (write as { wallTime?: Date } | undefined)?.wallTime?.getTime() ?? landing.landedAt;
      const writerToken = this.beliefs.find((b) => b.client === landing.client && b.from <= landing.checkedAt)?.token;
      // Both instants are whole milliseconds: a hand-out in the landing's millisecond came first (the
      // gate forwards the write only once the hand-out's step is over; a hand-out after the landing
      // needs at least the write's reply and a load's round trip).
      const newer = this.beliefs.find((b) => b.client !== landing.client && b.token !== writerToken && b.from > landing.checkedAt && b.from <= landedAt);
      const real = newer !== undefined;
      if (real !== landing.window > 0) {
        const handOuts = this.beliefs.map((b) => `client ${b.client} ${b.token.slice(0, 6)} from ${b.from - this.start} ms`).join(', ');
        windows.push(`${landing.title}: the model says ${landing.window > 0 ? `window W${landing.window}` : 'no window'}, the server's history says ${real ? `it landed after client ${newer!.client} was handed the lock` : 'no window'} (checked at ${landing.checkedAt - this.start} ms, landed at ${landedAt - this.start} ms${write ? '' : ', not in the history'}; hand-outs: ${handOuts})`);
      }
    }
    return { lease, mutex, windows, grants: spans.length, modelLease };
  }

  /**
   * How an unexpired grant was ended at `wall`, from the last write forwarded to the lock collection
   * before it: `self:<client>` (a release of the acquisition by that instance), `other:<kind>` (an
   * end the README documents: forceUnlock, Model.unlock / releaseAllFor, a renewal by the same
   * owner), or `undocumented:<kind>` (anything else: a bug).
   */
  private endedBy(wall: number, span: { client: number | undefined; token: string }, next: MongoDocument | undefined): string {
    // A new token: the acquisition that took the record, known by its token (the lock command
    // that carried it), not by timing.
    const nextToken = next?.token;
    if (typeof nextToken === 'string') {
      const by = this.forwarded.find((f) => f.kind === 'lock' && f.token === nextToken);
      if (!by) return 'undocumented:unknown-acquisition';
      const sameOwner = span.client !== undefined && this.options.owners[span.client] === this.options.owners[by.client];
      return sameOwner ? 'other:renewal' : `undocumented:lock:${by.client}`;
    }
    // A release: the last release forwarded before the change was written (the server writes it
    // after the command arrives, so its forward comes first; lock commands are not releases).
    const releases = this.forwarded.filter((f) => ['unlock', 'release', 'giveback', 'force', 'unlock-owner'].includes(f.kind) && f.at <= wall);
    const last = releases[releases.length - 1];
    if (!last) return 'undocumented:unknown';
    // A release by token ends only its own acquisition: by another one's token it is a bug.
    if (last.kind === 'unlock' || last.kind === 'release' || last.kind === 'giveback') return last.token === span.token ? `self:${last.client}` : `undocumented:${last.kind}:${last.client}`;
    return `other:${last.kind}`;
  }
}

export type { Connection };
