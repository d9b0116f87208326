/**
 * The compatibility record stays true (PRODUCT.md property 9): every command shape listed in
 * docs/lock-commands.json points at a section of docs/mongodb-compatibility.md that exists, and
 * the shape normalisation used by the recorder does what the record says. (Whether every command
 * the tests send is listed is checked by Jest's global teardown; see test-backend/lock-commands.ts.)
 */
import { readFileSync } from 'node:fs';
import { Long, ObjectId } from 'mongodb';
import { RECORD_FILE, UNDOCUMENTED_ANCHOR, commandShape, commandKey, commandShapeAndKey, markdownAnchors, readList, shapeKey } from '../../test-backend/lock-commands';

const list = readList();
const anchors = markdownAnchors(readFileSync(RECORD_FILE, 'utf8'));

describe('docs/lock-commands.json', () => {
  test('lists at least the acquire, the release and the deployment probe', () => {
    const names = list.commands.map((entry) => Object.keys(entry.shape as object)[0]);
    expect(names).toEqual(expect.arrayContaining(['findAndModify', 'update', 'find', 'hello']));
  });

  test.each(list.commands.map((entry) => [entry.id, entry.anchor] as const))('%s is documented at an existing section (%s)', (_id, anchor) => {
    if (anchor === UNDOCUMENTED_ANCHOR) {
      throw new Error(`${_id} was added by npm run compat:update and is not documented yet: describe it in docs/mongodb-compatibility.md and set its anchor.`);
    }
    expect(anchors).toContain(anchor);
  });

  test('the record\'s own links point at sections that exist', () => {
    const markdown = readFileSync(RECORD_FILE, 'utf8');
    const links = [...markdown.matchAll(/\]\((#[^)\s]+)\)/g)].map((match) => match[1]);
    expect(links.length).toBeGreaterThan(10);
    expect(links.filter((link) => !anchors.has(link))).toEqual([]);
  });

  test('ids and shapes are unique', () => {
    const ids = list.commands.map((entry) => entry.id);
    expect(new Set(ids).size).toBe(ids.length);
    const shapes = list.commands.map((entry) => shapeKey(entry.shape));
    expect(new Set(shapes).size).toBe(shapes.length);
  });
});

describe('markdownAnchors', () => {
  test('explicit <a id> anchors and GitHub heading slugs', () => {
    const found = markdownAnchors('<a id="cmd-x"></a>\n### R1. `$expr` is refused in an upsert\'s filter\n## Notes\n## Notes\n```\n# not a heading\n```\n');
    expect([...found]).toEqual(['#cmd-x', '#r1-expr-is-refused-in-an-upserts-filter', '#notes', '#notes-1']);
  });
});

describe('commandShape', () => {
  const id = new ObjectId();
  const acquire = {
    findAndModify: 'items.locks',
    query: { _id: id },
    update: [{ $set: { owner: { $cond: [{ $eq: ['$owner', { $literal: '$_id' }] }, { $literal: 'key' }, '$owner'] }, n: { $add: [{ $ifNull: ['$fence', 0] }, 1] } } }],
    fields: { _id: 0, acquired: { $eq: ['$token', { $literal: 'tok' }] }, now: '$$NOW' },
    new: true,
    upsert: true,
    lsid: { id: 'x' },
    txnNumber: Long.fromNumber(3),
    $clusterTime: { clusterTime: 1 },
    $db: 'app',
  };

  test('keeps operators, field paths, variables and the plugin\'s constants; tags caller values; drops the envelope', () => {
    expect(commandShape('findAndModify', acquire, '<lock collection>')).toEqual({
      findAndModify: '<lock collection>',
      fields: { _id: 0, acquired: { $eq: ['$token', { $literal: '<literal>' }] }, now: '$$NOW' },
      new: true,
      query: { _id: '<objectId>' },
      update: [{ $set: { owner: { $cond: [{ $eq: ['$owner', { $literal: '<literal>' }] }, { $literal: '<literal>' }, '$owner'] }, n: { $add: [{ $ifNull: ['$fence', 0] }, 1] } } }],
      upsert: true,
    });
  });

  test('values in filters are tagged even when they look like field paths or numbers', () => {
    const shape = commandShape('update', { update: 'c', updates: [{ q: { owner: '$x', _id: 5, $expr: { $gt: ['$expiresAt', '$$NOW'] } }, u: { $set: { a: 1 } } }] });
    expect(shape).toEqual({ update: '<collection>', updates: [{ q: { owner: '<string>', _id: '<number>', $expr: { $gt: ['$expiresAt', '$$NOW'] } }, u: { $set: { a: 1 } } }] });
  });

  test('arrays of same-shaped elements collapse; mixed ones do not', () => {
    const ids = [new ObjectId(), new ObjectId(), new ObjectId()];
    expect(commandShape('find', { find: 'c', filter: { _id: { $in: ids } } })).toEqual({ find: '<collection>', filter: { _id: { $in: ['<objectId>'] } } });
    expect(commandShape('find', { find: 'c', filter: { _id: { $in: [ids[0], 'x'] } } })).toEqual({ find: '<collection>', filter: { _id: { $in: ['<objectId>', '<string>'] } } });
  });

  test('a command inside a transaction is marked, its transaction fields dropped', () => {
    expect(commandShape('commitTransaction', { commitTransaction: 1, lsid: {}, txnNumber: 1, autocommit: false, writeConcern: { w: 'majority' }, $db: 'admin' })).toEqual({
      commitTransaction: '<number>',
      inTransaction: true,
    });
  });

  test('index keys (sent as Maps) keep their fields and directions', () => {
    const shape = commandShape('createIndexes', { createIndexes: 'c', indexes: [{ key: new Map([['expiresAt', 1]]), name: 'expiresAt_ttl', expireAfterSeconds: 60 }] }, '<lock collection>');
    expect(shape).toEqual({ createIndexes: '<lock collection>', indexes: [{ expireAfterSeconds: '<number>', key: { expiresAt: 1 }, name: '<string>' }] });
  });

  test('the key built along with the shape is its shapeKey', () => {
    const command = { ...acquire, autocommit: false };
    const { shape, key } = commandShapeAndKey('findAndModify', command, '<lock collection>');
    expect(key).toBe(shapeKey(shape));
    expect(commandKey('findAndModify', command, '<lock collection>')).toBe(key);
    const getMore = { getMore: Long.fromNumber(7), collection: 'items.locks', maxTimeMS: 1000, $db: 'app' };
    expect(commandKey('getMore', getMore, '<lock collection>')).toBe(shapeKey(commandShape('getMore', getMore, '<lock collection>')));
  });

  test('shapeKey does not depend on key order', () => {
    expect(shapeKey({ a: 1, b: { c: 2, d: 3 } })).toBe(shapeKey({ b: { d: 3, c: 2 }, a: 1 }));
  });
});
