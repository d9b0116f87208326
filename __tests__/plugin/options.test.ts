/** Plugin options are validated when schema.plugin runs (PRODUCT.md property 7). */
import { Schema } from 'mongoose';
import { InvalidLockOptionError, LockError, lockPlugin, type LockPluginOptions } from '../../src';

const apply = (options: unknown, schema = new Schema({ title: String })) => () => schema.plugin(lockPlugin, options as LockPluginOptions);

test.each<[string, unknown, string]>([
  ['an unknown option', { ttl: 1000, tll: 5 }, 'tll'],
  ['a negative ttl', { ttl: -1 }, 'ttl'],
  ['a zero ttl', { ttl: 0 }, 'ttl'],
  ['a ttl below MIN_TTL_MS (no lease could cover it)', { ttl: 3 }, 'ttl'],
  ['NaN as ttl', { ttl: NaN }, 'ttl'],
  ['Infinity as ttl', { ttl: Infinity }, 'ttl'],
  ['a fractional ttl', { ttl: 1.5 }, 'ttl'],
  ['a string ttl', { ttl: '30000' }, 'ttl'],
  ['a ttl above one year', { ttl: 366 * 24 * 3600_000 }, 'ttl'],
  ['an empty collection name', { collection: '' }, 'collection'],
  ['a collection name with $', { collection: 'a$b' }, 'collection'],
  ['a system collection', { collection: 'system.locks' }, 'collection'],
  ['an unknown ownerStorage', { ownerStorage: 'rot13' }, 'ownerStorage'],
  ['a short ownerSecret', { ownerSecret: 'short' }, 'ownerSecret'],
  ['an ownerSecret with plain storage', { ownerStorage: 'plain', ownerSecret: 'x'.repeat(32) }, 'ownerSecret'],
  ['a non-boolean requireLock', { requireLock: 'yes' }, 'requireLock'],
  ['an unknown transactions mode', { transactions: 'always' }, 'transactions'],
  ['options that are not an object', 'ttl=5', '(options)'],
])('%s is refused at schema.plugin time', (_label, options, option) => {
  let error: unknown;
  try {
    apply(options)();
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(InvalidLockOptionError);
  expect(error).toBeInstanceOf(LockError);
  expect((error as InvalidLockOptionError).code).toBe('INVALID_OPTION');
  expect((error as InvalidLockOptionError).option).toBe(option);
  expect((error as Error).message).toContain(option);
});

test('valid options are accepted', () => {
  expect(apply({ ttl: 4, collection: 'my.locks', ownerStorage: 'hash', ownerSecret: Buffer.alloc(16, 1), requireLock: true, transactions: 'never' })).not.toThrow();
  expect(apply(undefined)).not.toThrow();
});

test('a schema without _id cannot take the plugin', () => {
  const schema = new Schema({ title: String }, { _id: false });
  expect(apply({}, schema)).toThrow(InvalidLockOptionError);
});
