/**
 * Matching of expected and actual values as the unified test format specifies it
 * (mongodb/specifications source/unified-test-format/unified-test-format.md, "Evaluating Matches"):
 * root-level documents may carry extra fields, nested ones may not; key order does not matter;
 * numbers compare by value across int/long/double; `$$`-operators ($$exists, $$type,
 * $$unsetOrMatches, $$sessionLsid, $$matchesEntity, $$matchesHexBytes, $$lte, $$matchAsDocument,
 * $$matchAsRoot) are honoured.
 */
import { EJSON, type Document } from 'bson';

export class MatchError extends Error {}

export interface MatchContext {
  /** Resolves an entity (for $$sessionLsid / $$matchesEntity). */
  entity(name: string): unknown;
  /** The lsid document of a session entity. */
  sessionLsid(name: string): Document | undefined;
}

function bsonType(v: unknown): string {
  if (v === null) return 'null';
  if (v === undefined) return 'undefined';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number') return Number.isInteger(v) ? (Math.abs(v) < 2 ** 31 ? 'int' : 'long') : 'double';
  if (typeof v === 'bigint') return 'long';
  if (Array.isArray(v)) return 'array';
  if (v instanceof Date) return 'date';
  if (v instanceof RegExp) return 'regex';
  const t = (v as { _bsontype?: string })._bsontype;
  switch (t) {
    case 'ObjectId':
      return 'objectId';
    case 'Binary':
      return 'binData';
    case 'Timestamp':
      return 'timestamp';
    case 'Long':
      return 'long';
    case 'Int32':
      return 'int';
    case 'Double':
      return 'double';
    case 'Decimal128':
      return 'decimal';
    case 'BSONRegExp':
      return 'regex';
    case 'MinKey':
      return 'minKey';
    case 'MaxKey':
      return 'maxKey';
    case 'Code':
      return 'javascript';
    case 'BSONSymbol':
      return 'symbol';
    case undefined:
      return 'object';
    default:
      return t;
  }
}

/**
 * The driver hands numbers back as JS numbers (promoteValues), so an actual number's BSON type is
 * only known up to int/long/double ambiguity: an integral value matches 'int', 'long' and 'double'
 * expectations (a lenient reading, stated in FIDELITY.md), a fractional one only 'double'.
 */
function typeMatches(actual: unknown, expected: string | string[]): boolean {
  const wanted = Array.isArray(expected) ? expected : [expected];
  const t = bsonType(actual);
  if (wanted.includes(t)) return true;
  if (wanted.includes('number') && ['int', 'long', 'double', 'decimal'].includes(t)) return true;
  if (typeof actual === 'number' && Number.isInteger(actual)) return wanted.some((w) => w === 'int' || w === 'long' || w === 'double');
  if (t === 'object' && wanted.includes('object')) return true;
  return false;
}

function isNumeric(v: unknown): boolean {
  const t = bsonType(v);
  return t === 'int' || t === 'long' || t === 'double';
}

function numberOf(v: unknown): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  return Number((v as { valueOf(): unknown }).valueOf?.() ?? v);
}

export function isPlainDoc(v: unknown): v is Document {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Date) && !(v instanceof RegExp) && !(v as { _bsontype?: string })._bsontype && !ArrayBuffer.isView(v);
}

function describe(v: unknown): string {
  try {
    return EJSON.stringify(v as Document, { relaxed: true });
  } catch {
    return String(v);
  }
}

function fail(path: string, msg: string): never {
  throw new MatchError(`${path || '<root>'}: ${msg}`);
}

function scalarEquals(expected: unknown, actual: unknown): boolean {
  if (isNumeric(expected) && isNumeric(actual)) return numberOf(expected) === numberOf(actual);
  if (expected instanceof Date && actual instanceof Date) return expected.getTime() === actual.getTime();
  if (expected === null || actual === null) return expected === actual;
  if (typeof expected !== 'object' || typeof actual !== 'object') return expected === actual;
  return describe(expected) === describe(actual);
}

/** Applies a `$$` operator held by `op` (`root`: the value it wraps is a root-level document). */
function special(op: Document, actual: unknown, present: boolean, path: string, ctx: MatchContext, root = false): void {
  const [name] = Object.keys(op);
  const arg = op[name];
  switch (name) {
    case '$$exists':
      if (!!arg !== present) fail(path, `expected ${arg ? 'present' : 'absent'}`);
      return;
    case '$$type':
      if (!present) fail(path, `expected a value of type ${JSON.stringify(arg)}, field is absent`);
      if (!typeMatches(actual, arg as string | string[])) fail(path, `expected type ${JSON.stringify(arg)}, got ${bsonType(actual)} ${describe(actual)}`);
      return;
    case '$$unsetOrMatches':
      if (!present || actual === undefined) return;
      match(arg, actual, { path, root, ctx });
      return;
    case '$$sessionLsid': {
      const lsid = ctx.sessionLsid(String(arg));
      if (!lsid) fail(path, `no session entity ${String(arg)}`);
      if (!present) fail(path, 'expected an lsid');
      match(lsid, actual, { path, root: false, ctx });
      return;
    }
    case '$$matchesEntity':
      if (!present) fail(path, 'expected a value');
      match(ctx.entity(String(arg)), actual, { path, root: false, ctx });
      return;
    case '$$matchesHexBytes': {
      const buf = (actual as { buffer?: Uint8Array })?.buffer ?? actual;
      const hex = Buffer.from(buf as Uint8Array).toString('hex');
      if (hex.toLowerCase() !== String(arg).toLowerCase()) fail(path, `expected bytes ${String(arg)}, got ${hex}`);
      return;
    }
    case '$$lte':
      if (!present || !isNumeric(actual) || numberOf(actual) > numberOf(arg)) fail(path, `expected <= ${describe(arg)}, got ${describe(actual)}`);
      return;
    case '$$matchAsDocument':
      if (typeof actual !== 'string') fail(path, 'expected a JSON string');
      match(arg, EJSON.parse(actual), { path, root: false, ctx });
      return;
    case '$$matchAsRoot':
      match(arg, actual, { path, root: true, ctx });
      return;
    default:
      fail(path, `unsupported special operator ${name}`);
  }
}

function isSpecial(v: unknown): v is Document {
  if (!isPlainDoc(v)) return false;
  const keys = Object.keys(v);
  return keys.length === 1 && keys[0].startsWith('$$');
}

export function match(expected: unknown, actualIn: unknown, opts: { path?: string; root: boolean; ctx: MatchContext }): void {
  const path = opts.path ?? '';
  // The driver builds some command fields (find/update `sort`, createIndexes `key`) as Maps; the
  // command it sends is the BSON document of the Map's entries, which is what the test describes.
  const actual = actualIn instanceof Map ? Object.fromEntries(actualIn) : actualIn;
  if (isSpecial(expected)) {
    special(expected, actual, actual !== undefined, path, opts.ctx, opts.root);
    return;
  }
  if (isPlainDoc(expected)) {
    if (!isPlainDoc(actual)) fail(path, `expected a document ${describe(expected)}, got ${describe(actual)}`);
    for (const k of Object.keys(expected)) {
      const e = expected[k];
      const present = Object.prototype.hasOwnProperty.call(actual, k) && actual[k] !== undefined;
      if (isSpecial(e)) {
        special(e, actual[k], present, `${path}.${k}`, opts.ctx);
        continue;
      }
      if (!present) fail(`${path}.${k}`, `missing (expected ${describe(e)})`);
      match(e, actual[k], { path: `${path}.${k}`, root: false, ctx: opts.ctx });
    }
    if (!opts.root) {
      const extra = Object.keys(actual).filter((k) => !(k in expected) && actual[k] !== undefined);
      if (extra.length) fail(path, `unexpected fields ${extra.join(', ')} in ${describe(actual)}`);
    }
    return;
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) fail(path, `expected an array, got ${describe(actual)}`);
    if (actual.length !== expected.length) fail(path, `expected ${expected.length} elements, got ${actual.length}: ${describe(actual)}`);
    expected.forEach((e, i) => match(e, actual[i], { path: `${path}[${i}]`, root: false, ctx: opts.ctx }));
    return;
  }
  if (!scalarEquals(expected, actual)) fail(path, `expected ${describe(expected)}, got ${describe(actual)}`);
}

/** Arrays of root-level documents (find/aggregate results): each element is matched as a root. */
export function matchRootArray(expected: unknown[], actual: unknown, ctx: MatchContext): void {
  if (!Array.isArray(actual)) fail('', `expected an array, got ${describe(actual)}`);
  if (actual.length !== expected.length) fail('', `expected ${expected.length} documents, got ${actual.length}: ${describe(actual)}`);
  expected.forEach((e, i) => match(e, actual[i], { path: `[${i}]`, root: true, ctx }));
}
