/**
 * The positions of a command the server evaluates (security tests, PRODUCT.md property 11): a
 * caller value found there outside `$literal` is evaluated by the server. Shared by
 * security/group-waiting-no-evaluation and security/single-waiter-no-evaluation.
 */
import type { Document } from 'mongodb';
import { connect, type MonitoredConnection, type testDatabase } from './db';

/** Every string of `values` found in a position the server evaluates, outside `$literal`, in one command. */
export function evaluatedCallerValues(command: Document, values: ReadonlySet<string>): string[] {
  const found: string[] = [];
  const expression = (value: unknown): void => {
    if (typeof value === 'string') {
      if (values.has(value)) found.push(value);
      return;
    }
    if (Array.isArray(value)) return value.forEach(expression);
    if (value === null || typeof value !== 'object' || (value as { _bsontype?: string })._bsontype) return;
    for (const [key, inner] of Object.entries(value as Document)) if (key !== '$literal') expression(inner);
  };
  // Query language: only `$expr` (and `$function`/`$where`, which the plugin must never send) evaluates.
  const query = (filter: unknown): void => {
    if (filter === null || typeof filter !== 'object') return;
    if (Array.isArray(filter)) return filter.forEach(query);
    for (const [key, inner] of Object.entries(filter as Document)) {
      if (key === '$expr' || key === '$where' || key === '$function') expression(inner);
      else query(inner);
    }
  };
  const pipeline = (stages: unknown): void => {
    if (!Array.isArray(stages)) return;
    for (const stage of stages as Document[]) {
      for (const [name, body] of Object.entries(stage)) {
        if (name === '$match') query(body);
        else if (name === '$lookup') {
          const lookup = body as Document;
          if (lookup.let) expression(lookup.let);
          pipeline(lookup.pipeline);
        } else if (name === '$unionWith') pipeline((body as Document).pipeline);
        else if (name === '$facet') Object.values(body as Document).forEach(pipeline);
        else expression(body);
      }
    }
  };
  if (Array.isArray(command.update)) pipeline(command.update);
  if (command.let) expression(command.let);
  for (const p of [command.fields, command.projection]) if (p) expression(p);
  for (const f of [command.query, command.filter]) query(f);
  if (Array.isArray(command.pipeline)) pipeline(command.pipeline);
  for (const u of (command.updates as Document[] | undefined) ?? []) {
    query(u.q);
    if (Array.isArray(u.u)) pipeline(u.u);
  }
  for (const d of (command.deletes as Document[] | undefined) ?? []) query(d.q);
  return found;
}

/**
 * The cast of the no-evaluation waiting tests: `waiters` connections whose every command is
 * recorded in `sent` (the shape proof walks them), and a holder's connection, not recorded. Opened
 * in beforeAll; afterAll drops the database and closes them.
 */
export function recordedWaiters(db: ReturnType<typeof testDatabase>, waiters: number): { waiters: MonitoredConnection[]; holder: MonitoredConnection; sent: Document[] } {
  const cast = { waiters: [] as MonitoredConnection[], sent: [] as Document[] } as { waiters: MonitoredConnection[]; holder: MonitoredConnection; sent: Document[] };
  beforeAll(async () => {
    for (let i = 0; i < waiters; i++) {
      const conn = await connect(db.name);
      conn.connection.getClient().on('commandStarted', (event) => cast.sent.push(event.command));
      cast.waiters.push(conn);
    }
    cast.holder = await connect(db.name);
  });
  afterAll(async () => {
    await db.drop(cast.holder.connection);
    await Promise.all([...cast.waiters, cast.holder].map((conn) => conn.close()));
  });
  return cast;
}

type Outcome = { ok: true; value: string[] } | { ok: false; error: unknown };

/**
 * The two proofs of one case: both waiters were served with nothing wrong on the server, one after
 * the other (their holding windows do not overlap), and no caller value of `unique` (a `$`-string
 * the plugin never writes itself) appears in `sent` where the server evaluates it.
 */
export function expectServedOneAtATimeUnevaluated(
  outcomes: [Outcome, Outcome],
  windows: Array<{ from: number; to: number }>,
  sent: readonly Document[],
  values: readonly string[],
  unique: Record<string, string>,
): void {
  const [a, b] = outcomes;
  expect({ a: a.ok ? a.value : String(a.error), b: b.ok ? b.value : String(b.error) }).toEqual({ a: [], b: [] });
  const [w1, w2] = [...windows].sort((x, y) => x.from - y.from);
  expect(w2!.from).toBeGreaterThanOrEqual(w1!.to);
  const callerValues = new Set(values.filter((v) => Object.values(unique).includes(v)));
  const evaluated = sent.flatMap((command) => evaluatedCallerValues(command, callerValues).map((v) => `${Object.keys(command)[0]}: ${v}`));
  expect(evaluated).toEqual([]);
}
