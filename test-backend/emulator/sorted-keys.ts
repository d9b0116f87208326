/**
 * An ordered set of index entries (a list of sorted blocks, each at most 2 x BLOCK long): insert
 * and remove in O(log n + BLOCK), a seek in O(log n), then a scan forward or backward. It is what
 * makes an index scan in the emulator cost what it costs in mongod's B-tree: the entries inside
 * the bounds, not the collection.
 *
 * Scans are lazy and must be consumed before the set changes (every command runs synchronously
 * within one turn of the event loop, and the readers collect their matches before writing).
 */
const BLOCK = 256;

export class SortedKeys<T> {
  private blocks: T[][] = [];
  private count = 0;

  constructor(private readonly cmp: (a: T, b: T) => number) {}

  get size(): number {
    return this.count;
  }

  clear(): void {
    this.blocks = [];
    this.count = 0;
  }

  /** The block that holds (or would hold) `e`: the first whose last entry is not below it. */
  private blockFor(e: T): number {
    const bs = this.blocks;
    let lo = 0;
    let hi = bs.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const last = bs[mid][bs[mid].length - 1];
      if (this.cmp(last, e) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private static firstAtLeast<T>(block: T[], e: T, cmp: (a: T, b: T) => number): number {
    let lo = 0;
    let hi = block.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cmp(block[mid], e) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  insert(e: T): void {
    if (this.blocks.length === 0) {
      this.blocks.push([e]);
      this.count = 1;
      return;
    }
    const b = this.blockFor(e);
    const block = this.blocks[b];
    block.splice(SortedKeys.firstAtLeast(block, e, this.cmp), 0, e);
    this.count++;
    if (block.length > 2 * BLOCK) this.blocks.splice(b, 1, block.slice(0, BLOCK), block.slice(BLOCK));
  }

  /** Removes the entry comparing equal to `e`; false if there is none. */
  remove(e: T): boolean {
    if (this.blocks.length === 0) return false;
    const b = this.blockFor(e);
    const block = this.blocks[b];
    const i = SortedKeys.firstAtLeast(block, e, this.cmp);
    if (i >= block.length || this.cmp(block[i], e) !== 0) return false;
    block.splice(i, 1);
    this.count--;
    if (block.length === 0) this.blocks.splice(b, 1);
    return true;
  }

  /** The position of the first entry for which `after` holds (`after` is false, then true, along the order). */
  private seek(after: (e: T) => boolean): [number, number] {
    const bs = this.blocks;
    let lo = 0;
    let hi = bs.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (after(bs[mid][bs[mid].length - 1])) hi = mid;
      else lo = mid + 1;
    }
    if (lo === bs.length) return [lo, 0];
    const block = bs[lo];
    let i = 0;
    let j = block.length;
    while (i < j) {
      const mid = (i + j) >> 1;
      if (after(block[mid])) j = mid;
      else i = mid + 1;
    }
    return [lo, i];
  }

  /**
   * The entries between two cuts of the order, forward or backward: `beforeStart` holds for the
   * entries before the range (a prefix of the order), `afterEnd` for those after it (a suffix).
   */
  *range(beforeStart: (e: T) => boolean, afterEnd: (e: T) => boolean, backward = false): Generator<T> {
    const bs = this.blocks;
    if (!backward) {
      let [b, i] = this.seek((e) => !beforeStart(e));
      for (; b < bs.length; b++, i = 0) {
        const block = bs[b];
        for (; i < block.length; i++) {
          if (afterEnd(block[i])) return;
          yield block[i];
        }
      }
      return;
    }
    // Start just before the first entry after the range.
    let [b, i] = this.seek(afterEnd);
    i--;
    if (i < 0) {
      b--;
      if (b < 0) return;
      i = bs[b].length - 1;
    }
    for (; b >= 0; b--, i = b >= 0 ? bs[b].length - 1 : 0) {
      const block = bs[b];
      for (; i >= 0; i--) {
        if (beforeStart(block[i])) return;
        yield block[i];
      }
    }
  }

  /** Every entry in order (or reversed). */
  *all(backward = false): Generator<T> {
    yield* this.range(() => false, () => false, backward);
  }
}
