/**
 * Wire-protocol framing: splits the TCP byte stream into messages and
 * decodes/encodes OP_MSG, legacy OP_QUERY (handshake only) and OP_REPLY.
 */
import { deserialize, serialize, type Document } from 'bson';
import { normalizeIn } from './numbers';

export const OP_REPLY = 1;
export const OP_QUERY = 2004;
export const OP_MSG = 2013;
export const OP_COMPRESSED = 2012;

export const FLAG_CHECKSUM_PRESENT = 1 << 0;
export const FLAG_MORE_TO_COME = 1 << 1;
export const FLAG_EXHAUST_ALLOWED = 1 << 16;

/**
 * Deserialisation keeps every number's BSON type (no promotion) and never turns binaries into
 * Buffers; `readDocument` then normalises numbers into the emulator's representation (numbers.ts).
 */
export const BSON_READ_OPTIONS = { promoteBuffers: false, promoteLongs: false, promoteValues: false, bsonRegExp: false } as const;

/** A BSON document as the emulator holds it: numbers normalised (numbers.ts). */
export function readDocument(buf: Uint8Array): Document {
  return normalizeIn(deserialize(buf, BSON_READ_OPTIONS));
}

export interface IncomingMessage {
  requestId: number;
  opCode: number;
  /** OP_MSG flag bits (0 for OP_QUERY). */
  flags: number;
  /** The command: kind-0 body merged with kind-1 document sequences (as arrays). */
  command: Document;
  /** For OP_QUERY: the full collection name, e.g. "admin.$cmd". */
  fullCollectionName?: string;
}

export class ProtocolError extends Error {}

/** Accumulates socket chunks and yields complete messages. */
export class MessageFramer {
  private chunks: Buffer[] = [];
  private length = 0;

  push(chunk: Buffer): Buffer[] {
    this.chunks.push(chunk);
    this.length += chunk.length;
    const out: Buffer[] = [];
    for (;;) {
      if (this.length < 4) break;
      const head = this.chunks.length === 1 ? this.chunks[0] : this.flatten();
      const size = head.readInt32LE(0);
      if (size < 16 || size > 64 * 1024 * 1024) throw new ProtocolError(`invalid message length ${size}`);
      if (this.length < size) break;
      const all = this.flatten();
      out.push(all.subarray(0, size));
      const rest = all.subarray(size);
      this.chunks = rest.length ? [rest] : [];
      this.length = rest.length;
    }
    return out;
  }

  private flatten(): Buffer {
    if (this.chunks.length > 1) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0];
  }
}

export function decodeMessage(buf: Buffer): IncomingMessage {
  const requestId = buf.readInt32LE(4);
  const opCode = buf.readInt32LE(12);
  if (opCode === OP_MSG) return decodeOpMsg(buf, requestId);
  if (opCode === OP_QUERY) return decodeOpQuery(buf, requestId);
  if (opCode === OP_COMPRESSED) throw new ProtocolError('OP_COMPRESSED is not supported (no compressors are advertised)');
  throw new ProtocolError(`unsupported opCode ${opCode}`);
}

function decodeOpMsg(buf: Buffer, requestId: number): IncomingMessage {
  const flags = buf.readUInt32LE(16);
  // Required bits other than the three defined ones must make us fail (OP_MSG spec: bits 0-15 are "required").
  if ((flags & 0xffff) & ~(FLAG_CHECKSUM_PRESENT | FLAG_MORE_TO_COME)) throw new ProtocolError(`unknown required OP_MSG flag bits ${flags}`);
  const end = flags & FLAG_CHECKSUM_PRESENT ? buf.length - 4 : buf.length;
  let pos = 20;
  let body: Document | undefined;
  const sequences: Array<[string, Document[]]> = [];
  while (pos < end) {
    const kind = buf[pos++];
    if (kind === 0) {
      const size = buf.readInt32LE(pos);
      body = readDocument(buf.subarray(pos, pos + size));
      pos += size;
    } else if (kind === 1) {
      const size = buf.readInt32LE(pos);
      const sectionEnd = pos + size;
      let p = pos + 4;
      const nul = buf.indexOf(0, p);
      const id = buf.toString('utf8', p, nul);
      p = nul + 1;
      const docs: Document[] = [];
      while (p < sectionEnd) {
        const dsize = buf.readInt32LE(p);
        docs.push(readDocument(buf.subarray(p, p + dsize)));
        p += dsize;
      }
      sequences.push([id, docs]);
      pos = sectionEnd;
    } else {
      throw new ProtocolError(`unknown OP_MSG section kind ${kind}`);
    }
  }
  if (!body) throw new ProtocolError('OP_MSG without a kind-0 body section');
  for (const [id, docs] of sequences) body[id] = docs;
  return { requestId, opCode: OP_MSG, flags, command: body };
}

function decodeOpQuery(buf: Buffer, requestId: number): IncomingMessage {
  let pos = 20;
  const nul = buf.indexOf(0, pos);
  const fullCollectionName = buf.toString('utf8', pos, nul);
  pos = nul + 1 + 8; // skip numberToSkip, numberToReturn
  const size = buf.readInt32LE(pos);
  let command = readDocument(buf.subarray(pos, pos + size));
  // Legacy wrapped form: { $query: {...}, $readPreference: ... }
  if (command.$query && typeof command.$query === 'object') command = command.$query as Document;
  return { requestId, opCode: OP_QUERY, flags: 0, command, fullCollectionName };
}

let nextRequestId = 1;

function header(total: number, responseTo: number, opCode: number): Buffer {
  const h = Buffer.allocUnsafe(16);
  h.writeInt32LE(total, 0);
  h.writeInt32LE(nextRequestId++ & 0x7fffffff, 4);
  h.writeInt32LE(responseTo, 8);
  h.writeInt32LE(opCode, 12);
  return h;
}

export function encodeOpMsg(responseTo: number, doc: Document, moreToCome = false): Buffer {
  const body = serialize(doc, { ignoreUndefined: true });
  const total = 16 + 4 + 1 + body.length;
  const flags = Buffer.allocUnsafe(5);
  flags.writeUInt32LE(moreToCome ? FLAG_MORE_TO_COME : 0, 0);
  flags[4] = 0;
  return Buffer.concat([header(total, responseTo, OP_MSG), flags, body], total);
}

export function encodeOpReply(responseTo: number, doc: Document): Buffer {
  const body = serialize(doc, { ignoreUndefined: true });
  const total = 16 + 20 + body.length;
  const fields = Buffer.alloc(20);
  fields.writeInt32LE(8, 0); // responseFlags: AwaitCapable
  // cursorID 0 (8 bytes), startingFrom 0
  fields.writeInt32LE(1, 16); // numberReturned
  return Buffer.concat([header(total, responseTo, OP_REPLY), fields, body], total);
}
