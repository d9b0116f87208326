/**
 * `$inc`, `$mul`, `$min` and `$max` computed with BSON numeric types, before mingo's updater (which
 * knows only JavaScript numbers) sees the rest of the modifier.
 *
 * Sources:
 *  - ArithmeticNode (src/mongo/db/update/arithmetic_node.cpp): the result is SafeNum arithmetic
 *    (`valueToSet += originalValue` / `*=`; numbers.ts safeNumOp); "If the updated value is
 *    identical to the original value, treat this as a no-op" (`SafeNum::isIdentical`: same type and
 *    equal by that type's `==`, Decimal128::isEqual for decimals: numbers.ts isIdenticalNumber); an invalid result (a long overflow) is BadValue "Failed to apply <op> operations to
 *    current value (<SafeNum::debugString>) for document {<_id element>}"; a new field gets the
 *    argument (`$inc`) or the argument times `SafeNum(int32 0)` (`$mul`: "a createdValue that has
 *    the same type as the original element but has a 0 value"); a non-numeric existing value is
 *    TypeMismatch "Cannot apply <op> to a value of non-numeric type. {<_id>} has the field '<name>'
 *    of non-numeric type <type>".
 *  - CompareNode::updateExistingElement (src/mongo/db/update/compare_node.cpp): `$min`/`$max`
 *    compare the existing element with the argument (`compareWithBSONElement`, BSON order across
 *    types: bson-order.ts); equal, or already below/above, is a no-op, otherwise the argument is
 *    stored as it is; `setValueForNewElement` creates a missing field with the argument.
 *
 * Paths with `$[]` / `$[<id>]` are left to mingo only when nothing there can need a BSON type that
 * plain numbers do not carry (an Int32 argument over Int32 values, with an overflow check after);
 * otherwise they are refused.
 */
import type { Document } from 'bson';
import { compareValues } from './bson-order';
import { Codes, MongoCommandError, unsupported } from './errors';
import { containsWrapper, isIdenticalNumber, isNumeric, numKind, safeNumDebugString, safeNumOp } from './numbers';
import { bsonTypeName } from './update-rules';
import { formatValue, isPlainObject } from './values';

const OPS = ['$inc', '$mul', '$min', '$max'] as const;

export interface ArithmeticPlan {
  /** The modifier without the entries computed here. */
  rest: Document;
  /** Path/value pairs to assign after the rest of the modifier has been applied. */
  assign: Array<[string, unknown]>;
  /** Array-wide paths left to mingo that need the Int32 overflow check afterwards. */
  checkIntPrefixes: string[];
}

function valueAt(doc: Document, parts: string[]): { value: unknown; present: boolean } {
  let cur: unknown = doc;
  for (const p of parts) {
    if (Array.isArray(cur) && /^\d+$/.test(p)) {
      if (Number(p) >= cur.length) return { value: undefined, present: false };
      cur = cur[Number(p)];
    } else if (isPlainObject(cur) && p in cur) cur = cur[p];
    else return { value: undefined, present: false };
  }
  return { value: cur, present: true };
}

function related(a: string, b: string): boolean {
  return a === b || a.startsWith(`${b}.`) || b.startsWith(`${a}.`);
}

function allInts(v: unknown): boolean {
  if (Array.isArray(v)) return v.every(allInts);
  if (isPlainObject(v)) return Object.values(v).every(allInts);
  return !isNumeric(v) || numKind(v) === 'int';
}

export function planArithmetic(old: Document, modifier: Document): ArithmeticPlan {
  const otherPaths: string[] = [];
  for (const [op, spec] of Object.entries(modifier)) {
    if ((OPS as readonly string[]).includes(op) || !isPlainObject(spec)) continue;
    otherPaths.push(...Object.keys(spec));
    if (op === '$rename') otherPaths.push(...Object.values(spec).filter((x): x is string => typeof x === 'string'));
  }
  const allArithmetic: string[] = [];
  for (const op of OPS) if (isPlainObject(modifier[op])) allArithmetic.push(...Object.keys(modifier[op] as Document));
  const rest: Document = {};
  const assign: Array<[string, unknown]> = [];
  const checkIntPrefixes: string[] = [];
  for (const [op, spec] of Object.entries(modifier)) {
    if (!(OPS as readonly string[]).includes(op) || !isPlainObject(spec)) {
      rest[op] = spec;
      continue;
    }
    const kept: Document = {};
    for (const [path, arg] of Object.entries(spec)) {
      const positional = path.includes('$');
      const conflicting = otherPaths.some((p) => related(p, path)) || allArithmetic.filter((p) => related(p, path)).length > 1;
      if (positional || conflicting) {
        const prefix = positional ? path.slice(0, path.indexOf('$')).replace(/\.$/, '') : path;
        const there = valueAt(old, prefix.split('.')).value;
        if (containsWrapper(arg) || containsWrapper(there)) throw unsupported(`${op} on '${path}' with numbers that are not plain Int32 values or with conflicting paths`);
        if (op === '$inc' || op === '$mul') {
          if (numKind(arg) !== 'int' || !allInts(there)) throw unsupported(`${op} on the array-wide path '${path}' with a Double argument or over non-Int32 values (the result's BSON type is not tracked there)`);
          checkIntPrefixes.push(prefix);
        }
        kept[path] = arg;
        continue;
      }
      const at = valueAt(old, path.split('.'));
      if (op === '$inc' || op === '$mul') {
        if (!isNumeric(arg)) {
          kept[path] = arg; // TypeMismatch comes from checkArithmeticTypes / mingo
          continue;
        }
        if (at.present && !isNumeric(at.value)) {
          const name = path.split('.').pop();
          throw new MongoCommandError(Codes.TypeMismatch, `Cannot apply ${op} to a value of non-numeric type. {_id: ${formatValue(old._id)}} has the field '${name}' of non-numeric type ${bsonTypeName(at.value)}`);
        }
        const result = at.present ? safeNumOp(op === '$inc' ? 'add' : 'mul', arg, at.value) : op === '$inc' ? arg : safeNumOp('mul', arg, 0);
        if (result === undefined) {
          throw new MongoCommandError(Codes.BadValue, `Failed to apply ${op} operations to current value (${safeNumDebugString(at.value)}) for document {_id: ${formatValue(old._id)}}`);
        }
        if (at.present && isIdenticalNumber(result, at.value)) continue;
        assign.push([path, result]);
      } else {
        if (at.present) {
          const c = compareValues(arg, at.value);
          if (op === '$max' ? c <= 0 : c >= 0) continue;
        }
        assign.push([path, arg]);
      }
    }
    if (Object.keys(kept).length) rest[op] = kept;
  }
  return { rest, assign, checkIntPrefixes };
}

/** Assigns `value` at `path` in a copy-on-write way (containers along the path are copied). */
export function assignPath(doc: Document, path: string, value: unknown): Document {
  const parts = path.split('.');
  const root: Document = { ...doc };
  let cur: Document | unknown[] = root;
  for (let i = 0; i < parts.length; i++) {
    const last = i === parts.length - 1;
    let key = parts[i];
    if (Array.isArray(cur)) {
      const idx = Number(key);
      while (cur.length < idx) cur.push(null); // mongod pads an array with nulls up to the index
      key = String(idx);
    }
    const container = cur as Record<string, unknown>;
    if (last) container[key] = value;
    else {
      const nxt = container[key];
      const copy: Document | unknown[] = Array.isArray(nxt) ? nxt.slice() : isPlainObject(nxt) ? { ...nxt } : {};
      container[key] = copy;
      cur = copy;
    }
  }
  return root;
}

/** After mingo applied an Int32 `$inc`/`$mul` over Int32 values: a result beyond Int32 would be an Int64 on mongod. */
export function checkIntResults(next: Document, prefixes: string[]): void {
  const bad = (v: unknown): boolean => {
    if (Array.isArray(v)) return v.some(bad);
    if (isPlainObject(v)) return Object.values(v).some(bad);
    return typeof v === 'number' && numKind(v) !== 'int';
  };
  for (const p of prefixes) if (bad(valueAt(next, p.split('.')).value)) throw unsupported(`an array-wide $inc/$mul whose Int32 result overflows into Int64`);
}
