/**
 * `let` on find, aggregate, update, delete and findAndModify (MongoDB 5.0+): named constants the
 * command's expressions read as `$$name`.
 *
 * Sources: manual, the `let` option of find/aggregate/update/delete/findAndModify ("Specifies a
 * document with a list of variables ... The document syntax is { <variable_name_1>: <expression_1>,
 * ... } The variable is set to the value returned by the expression, and cannot be changed
 * afterwards"; `$$NOW` may be used); variable names are checked by
 * Variables::uassertValidNameForUserWrite (src/mongo/db/pipeline/variables.cpp): 16866 "empty
 * variable names are not allowed", 16867 "'<name>' starts with an invalid character for a user
 * variable name", 16868 "'<name>' contains an invalid character for a variable name: '<c>'".
 * An undefined variable fails with 17276 "Use of undefined variable: <name>" (same file).
 */
import type { Document } from 'bson';
import { Codes, MongoCommandError } from './errors';
import { makeAggregator } from './mingo-context';
import { bindExpression, type SystemVars } from './query';
import { isPlainObject } from './values';

/** Variables::validateNameForUserWrite (also used for $merge's `let`). */
export function checkLetName(name: string): void {
  if (!name) throw new MongoCommandError(16866, 'empty variable names are not allowed');
  const first = name.charCodeAt(0);
  if (!((first >= 97 && first <= 122) || first >= 0x80)) throw new MongoCommandError(16867, `'${name}' starts with an invalid character for a user variable name`);
  for (const ch of name.slice(1)) {
    if (!/[a-zA-Z0-9_]/.test(ch) && ch.charCodeAt(0) < 0x80) throw new MongoCommandError(16868, `'${name}' contains an invalid character for a variable name: '${ch}'`);
  }
}

/** Evaluates a command's `let` document into constant values (undefined when there is none). */
export function evaluateLet(spec: unknown, vars: SystemVars): Document | undefined {
  if (spec === undefined) return undefined;
  if (!isPlainObject(spec)) throw new MongoCommandError(Codes.TypeMismatch, `BSON field 'let' is the wrong type '${Array.isArray(spec) ? 'array' : typeof spec}', expected type 'object'`);
  const names = Object.keys(spec);
  if (!names.length) return undefined;
  for (const n of names) checkLetName(n);
  const bound = bindExpression(spec, vars);
  const [out] = makeAggregator([{ $replaceWith: { $literal: {} } }, { $set: bound }]).run([{}]) as Document[];
  return out;
}
