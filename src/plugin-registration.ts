/**
 * Whether one application of `lockPlugin` to a schema should wire anything, decided before it
 * does. Mongoose applies a plugin in three ways, and each has a trap:
 *  - `schema.plugin(lockPlugin, options)`: after `model()` it is too late, because Mongoose
 *    copies statics, methods and hooks into the model when it compiles it. The types still say
 *    `Model.lock` exists, so this is refused loudly, naming the fix;
 *  - `mongoose.plugin(lockPlugin)` / `connection.plugin(lockPlugin)` (global registration): Mongoose
 *    applies it to every schema it compiles afterwards, which includes the plugin's own lock
 *    schemas (applying it there recursed without end: `x.locks.locks.locks...`) and every
 *    embedded schema (which may have no `_id`). The lock schemas are skipped; embedded schemas
 *    without `_id` are skipped; the guards skip embedded documents (plugin.ts);
 *  - both at once: the first application wins (an explicit `schema.plugin` runs before the global
 *    one, which Mongoose applies at `model()`), so a schema's own options override the global ones.
 */
import { LockConfigurationError } from './errors';
import { isLockSchema } from './lock-model';

/** Options Mongoose itself reads from a registration (`mongoose.plugin(fn, { deduplicate, tags })`). */
const MONGOOSE_REGISTRATION_OPTIONS: readonly string[] = ['deduplicate', 'tags'];

type Plugin = (...args: never[]) => unknown;

/** The parts of a Mongoose schema this module reads (present in Mongoose 8 and 9). */
interface SchemaLike {
  options?: unknown;
  /** Every plugin applied to the schema, the current one included (Schema.prototype.plugin pushes first). */
  plugins?: { fn: unknown }[];
  /** The Mongoose instance the schema belongs to. */
  base?: MongooseLike;
  path(name: string): unknown;
}

interface ConnectionLike {
  models?: Record<string, { schema?: unknown }>;
  plugins?: [unknown, unknown][];
}

interface MongooseLike {
  plugins?: [unknown, unknown][];
  connections?: ConnectionLike[];
}

export type PluginApplication = { skip: true } | { skip: false; options: unknown };

export function pluginApplication(schema: SchemaLike, plugin: Plugin, rawOptions: unknown): PluginApplication {
  // The plugin's own lock schemas: never (global registration reaches them too).
  if (isLockSchema(schema)) return { skip: true };
  // Already applied to this schema: the first application (and its options) stays.
  if ((schema.plugins ?? []).filter((entry) => entry.fn === plugin).length > 1) return { skip: true };
  const compiled = compiledModelName(schema);
  if (compiled !== undefined) {
    throw new LockConfigurationError(
      `schema.plugin(lockPlugin) ran after model() compiled ${JSON.stringify(compiled)} from this schema. Mongoose copies statics, ` +
        `methods and hooks when it compiles a model, so ${JSON.stringify(compiled)} has none of them (Model.lock is not a function) ` +
        'although its type says otherwise. Call schema.plugin(lockPlugin, options) before model(), or register it for every ' +
        'schema with mongoose.plugin(lockPlugin) before compiling any model.',
    );
  }
  // An embedded schema without `_id` reached by a global registration: nothing to lock there.
  // (Applied explicitly, the plugin refuses such a schema: see idCaster.)
  if (!schema.path('_id') && registeredGlobally(schema, plugin)) return { skip: true };
  return { skip: false, options: withoutRegistrationOptions(rawOptions) };
}

/** The name of a model already compiled from exactly this schema, on any connection of its Mongoose. */
function compiledModelName(schema: SchemaLike): string | undefined {
  for (const connection of schema.base?.connections ?? []) {
    for (const [name, model] of Object.entries(connection.models ?? {})) {
      if (model.schema === schema) return name;
    }
  }
  return undefined;
}

function registeredGlobally(schema: SchemaLike, plugin: Plugin): boolean {
  const base = schema.base;
  const has = (list: [unknown, unknown][] | undefined) => (list ?? []).some(([fn]) => fn === plugin);
  return has(base?.plugins) || (base?.connections ?? []).some((connection) => has(connection.plugins));
}

/** Drops the options Mongoose consumed itself; anything else is validated as a plugin option. */
function withoutRegistrationOptions(rawOptions: unknown): unknown {
  if (rawOptions === null || typeof rawOptions !== 'object' || Array.isArray(rawOptions)) return rawOptions;
  const options: Record<string, unknown> = { ...(rawOptions as Record<string, unknown>) };
  for (const name of MONGOOSE_REGISTRATION_OPTIONS) delete options[name];
  return options;
}
