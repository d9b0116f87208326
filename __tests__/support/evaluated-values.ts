/**
 * The positions of a command the server evaluates (security tests, PRODUCT.md property 11): a
 * caller value found there outside `$literal` is evaluated by the server. Shared by
 * security/group-waiting-no-evaluation and security/single-waiter-no-evaluation.
 */
import type { Document } from 'mongodb';

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
