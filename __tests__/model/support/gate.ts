/**
 * A gate between one client (a Mongoose connection) and the server: a TCP proxy that reads the
 * wire protocol (MongoDB Wire Protocol, OP_MSG: a 16-byte header, flag bits, section 0 holding the
 * command document) and lets a replay decide, command by command, when a request reaches the
 * server and when its reply reaches the client. So a schedule from the model (spec/) is forced
 * exactly: a request held at the gate has not executed; one forwarded executes at once (the
 * server runs it when it arrives); a reply held at the gate is a reply that arrives late.
 *
 * A fail point cannot do this: `failCommand`'s blockConnection delays a command before it runs
 * (mongodb/mongo src/mongo/db/commands.cpp CommandHelpers::evaluateFailCommandFailPoint, called by
 * src/mongo/db/service_entry_point_common.cpp before the command is invoked, and by mongos's
 * strategy.cpp likewise), for a fixed time; it cannot hold a reply after the server ran the
 * command, nor release the commands of several clients in an order chosen step by step.
 *
 * Every write the client sends on the watched collections (findAndModify, update, insert, delete;
 * reads, handshakes, monitoring, sessions and cursors pass) is offered to `policy`: 'pass' forwards it,
 * 'hold' keeps it until the replay takes it (`take`), 'fail' answers it at once with an error the
 * driver does not retry (Interrupted, 11601): the model ends that call there.
 * Connect through it with `directConnection=true`, so the driver talks to this address only.
 */
import { deserialize, serialize, type Document } from 'bson';
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

const OP_MSG = 2013;
const WRITES: ReadonlySet<string> = new Set(['findAndModify', 'update', 'insert', 'delete']);
const HEADER = 16;

export type Verdict = 'pass' | 'hold' | 'fail';

/** A request the gate holds, or one it forwarded and whose reply it holds. */
export interface Held {
  /** The command name (`findAndModify`, `update`, `find`, ...). */
  readonly name: string;
  /** The collection the command names. */
  readonly collection: string;
  readonly command: Document;
  /** Sends the request to the server; resolves with the reply, held until `deliver` (or delivered at once). */
  forward(options?: { holdReply?: boolean }): Promise<HeldReply>;
  /** Answers the request with a non-retryable error instead (the call fails; nothing executed). */
  fail(): void;
}

export interface HeldReply {
  readonly reply: Document;
  /** When the server's reply reached the gate (Date.now()). */
  readonly at: number;
  /** Lets the reply reach the client. */
  deliver(): void;
}

interface Waiter {
  predicate: (held: Held) => boolean;
  resolve: (held: Held) => void;
}

export interface Gate {
  /** host:port to connect to. */
  readonly address: string;
  /** Decides what happens to each watched command from now on. */
  setPolicy(policy: (name: string, collection: string, command: Document) => Verdict): void;
  /** The next held request matching `predicate` (one already held, or the next to arrive). */
  take(predicate: (held: Held) => boolean, timeoutMs?: number): Promise<Held>;
  /** Requests held and not taken yet. */
  pending(): Held[];
  close(): Promise<void>;
}

function commandOf(frame: Buffer): Document | undefined {
  if (frame.readInt32LE(12) !== OP_MSG) return undefined;
  // flagBits (4 bytes), then sections; section kind 0 is one BSON document: the command.
  let offset = HEADER + 4;
  while (offset < frame.length) {
    const kind = frame.readUInt8(offset);
    offset += 1;
    const size = frame.readInt32LE(offset);
    if (kind === 0) return deserialize(frame.subarray(offset, offset + size), { promoteValues: true });
    offset += size;
  }
  return undefined;
}

/** An OP_MSG reply to `requestId` carrying `body`. */
function replyFrame(requestId: number, body: Document): Buffer {
  const doc = Buffer.from(serialize(body));
  const frame = Buffer.alloc(HEADER + 4 + 1 + doc.length);
  frame.writeInt32LE(frame.length, 0);
  frame.writeInt32LE(0x7fff0000 + (requestId & 0xffff), 4);
  frame.writeInt32LE(requestId, 8);
  frame.writeInt32LE(OP_MSG, 12);
  frame.writeInt32LE(0, 16);
  frame.writeUInt8(0, 20);
  doc.copy(frame, 21);
  return frame;
}

/** Splits a stream into wire-protocol frames. */
function framer(onFrame: (frame: Buffer) => void): (chunk: Buffer) => void {
  let buffered = Buffer.alloc(0);
  return (chunk) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 4) {
      const length = buffered.readInt32LE(0);
      if (buffered.length < length) break;
      onFrame(buffered.subarray(0, length));
      buffered = buffered.subarray(length);
    }
  };
}

export async function openGate(upstream: { host: string; port: number }, watched: () => ReadonlySet<string>): Promise<Gate> {
  let policy: (name: string, collection: string, command: Document) => Verdict = () => 'pass';
  const held: Held[] = [];
  const waiters: Waiter[] = [];
  const sockets = new Set<Socket>();

  const offer = (item: Held) => {
    const index = waiters.findIndex((w) => w.predicate(item));
    if (index >= 0) {
      const [waiter] = waiters.splice(index, 1);
      waiter.resolve(item);
    } else {
      held.push(item);
    }
  };

  const server: Server = createServer((client) => {
    const backend = createConnection(upstream);
    sockets.add(client);
    sockets.add(backend);
    /** Replies the gate waits for, by the request id they answer. */
    const awaited = new Map<number, (frame: Buffer) => void>();
    client.on(
      'data',
      framer((frame) => {
        const command = commandOf(frame);
        const name = command ? Object.keys(command)[0] : undefined;
        const collection = command && name && typeof command[name] === 'string' ? (command[name] as string) : '';
        if (!command || !name || !watched().has(collection)) {
          backend.write(frame);
          return;
        }
        // Only the writes are the replay's to order; reads, index builds, cursors pass.
        const verdict = WRITES.has(name) ? policy(name, collection, command) : 'pass';
        const requestId = frame.readInt32LE(4);
        if (verdict === 'pass') {
          backend.write(frame);
          return;
        }
        const item: Held = {
          name,
          collection,
          command,
          forward: ({ holdReply = false } = {}) =>
            new Promise<HeldReply>((resolve) => {
              awaited.set(requestId, (replyBytes) => {
                const reply: HeldReply = {
                  reply: commandOf(replyBytes) ?? {},
                  at: Date.now(),
                  deliver: () => {
                    client.write(replyBytes);
                  },
                };
                if (!holdReply) reply.deliver();
                resolve(reply);
              });
              backend.write(frame);
            }),
          fail: () => {
            client.write(replyFrame(requestId, { ok: 0, errmsg: 'replay: the model ends this call here', code: 11601, codeName: 'Interrupted' }));
          },
        };
        if (verdict === 'fail') item.fail();
        else offer(item);
      }),
    );
    backend.on(
      'data',
      framer((frame) => {
        const answers = frame.readInt32LE(8);
        const handler = awaited.get(answers);
        if (handler) {
          awaited.delete(answers);
          handler(Buffer.from(frame));
        } else {
          client.write(frame);
        }
      }),
    );
    const closeBoth = () => {
      client.destroy();
      backend.destroy();
      sockets.delete(client);
      sockets.delete(backend);
    };
    client.on('close', closeBoth);
    backend.on('close', closeBoth);
    client.on('error', closeBoth);
    backend.on('error', closeBoth);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    address: `127.0.0.1:${port}`,
    setPolicy(next) {
      policy = next;
    },
    take(predicate, timeoutMs = 20_000) {
      const index = held.findIndex(predicate);
      if (index >= 0) return Promise.resolve(held.splice(index, 1)[0]);
      return new Promise<Held>((resolve, reject) => {
        const waiter: Waiter = {
          predicate,
          resolve: (item) => {
            clearTimeout(timer);
            resolve(item);
          },
        };
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(waiter), 1);
          reject(new Error(`gate: no matching request within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.push(waiter);
      });
    },
    pending: () => [...held],
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
