/**
 * Releases made by this process wake this process's waiters at once, on every topology (brief
 * reservecost): without a change stream (standalone servers) a waiter otherwise learned of a
 * release only at its next poll, so a hand-over between two callers of one process waited for that
 * poll (the reservation holder's RESERVED_POLL_MS, lock-waiter.ts).
 *
 * Every LockWatch with waiters is listed here under its lock collection's scope (LockStore.scope:
 * deployment and namespace), so a release through one connection reaches the waiters of every
 * connection of this process to the same lock collection. Without a live stream, with the fan-out
 * of one stream event across them all (LockWatch.wakeLocal: every waiter mid-attempt or holding the
 * document's reservation, and else the one longest waiting, at most one in the whole process).
 * With a live stream, only the reservation's holder: the release's event wakes the rest, as before.
 * Waiting `lockNext` calls are listed the same way (NextFeed, next-feed.ts: every waiting call
 * without live streams, the call reserving the document with them).
 */

/** What a LockWatch (or a lockNext feed, NextFeed) offers to a release of this process. */
export interface LocallyWakeable {
  /**
   * Wakes the waiters of the document `key` (idKey) as a stream event would (every waiter not
   * marked waiting: mid-attempt, or holding the reservation), and the one longest waiting only
   * when `pick`. Resolves to whether it picked one (the next watch then picks none).
   */
  wakeLocal(key: string, pick: boolean): boolean;
  /** Whether a waiter of the document `key` (idKey) here holds its reservation (then the freed document is its). */
  reserving(key: string): boolean;
  /** Wakes every waiter (a release whose documents are not known: releaseAllFor). */
  wakeEveryone(): void;
}

const watching = new Map<string, Set<LocallyWakeable>>();

/** Whether any waiter of this process is listed (a release without one skips computing its scope). */
export function anyoneWaiting(): boolean {
  return watching.size > 0;
}

/** Lists `watch` under `scope` while it has waiters. */
export function enlist(scope: string, watch: LocallyWakeable): void {
  let set = watching.get(scope);
  if (!set) watching.set(scope, (set = new Set()));
  set.add(watch);
}

/** Takes `watch` off the list of `scope` (it has no waiters left). */
export function delist(scope: string, watch: LocallyWakeable): void {
  const set = watching.get(scope);
  if (set?.delete(watch) && set.size === 0) watching.delete(scope);
}

/** This process released the lock of the document `key` (idKey) of `scope`: its waiters here ask again. */
export function releasedHere(scope: string, key: string): void {
  const set = watching.get(scope);
  if (!set) return;
  // A waiter of this process holding the document's reservation takes the freed document: no other
  // waiter is picked (it would be refused by the reservation, one command for nothing).
  const watches = [...set];
  let picked = watches.some((watch) => watch.reserving(key));
  for (const watch of watches) if (watch.wakeLocal(key, !picked)) picked = true;
}

/** This process released locks of `scope` it cannot name (releaseAllFor): every waiter here asks again. */
export function releasedManyHere(scope: string): void {
  const set = watching.get(scope);
  if (!set) return;
  for (const watch of [...set]) watch.wakeEveryone();
}
