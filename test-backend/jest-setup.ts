/**
 * Runs in every test file's sandbox before the tests. Jest 29's sandbox has its own Symbol
 * without Node's Symbol.asyncDispose; `await using` needs it, so install the registry symbol
 * that polyfills use (src/lock-handle.ts falls back to the same one).
 */
const symbols = Symbol as { asyncDispose?: symbol };
symbols.asyncDispose ??= Symbol.for('Symbol.asyncDispose');
