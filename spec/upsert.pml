/*
 * A guarded single-document upsert whose filter does not name its _id (issue 16 item 1):
 * `updateOne({ k: 'open' }, { $inc: { n: 1 } }, { upsert: true })` by a non-holder, while another
 * writer changes which documents match. Locks play no part in this property and are left out.
 * See spec/README.md.
 *
 * Documents X (0) and Y (1) exist and match; Z (2) is the document an upsert would insert.
 * The changer flips whether X or Y matches (FLIPS times).
 * Check mode (default; transactions: 'never', standalone), as built on branch `guard`
 * (src/guard/write-guard.ts checkThenWrite): each round searches (find, limit 1: any matching
 * document), and writes what it found WITHOUT upsert, narrowed to it; a write that matched
 * nothing (the document stopped matching) searches again; only a search that found nothing sends
 * the upsert, narrowed with `_id: { $exists: false }` so that it can only insert.
 * OLD_UPSERT: main before the fix: the found document's _id narrows the upsert, which is sent
 * with upsert: true, so a write whose target stopped matching inserts.
 * ATOMIC: the guard's transaction: the search and the write in one snapshot; the write conflicts
 * (and the transaction is retried) if the document it writes changed after the snapshot.
 *
 * SERIAL (checked when the write lands): the outcome is one the unguarded upsert could have had
 * at that instant: an update lands on a document that matches then; an insert lands when no
 * document matches, or (the README's documented window, Limits: "an upsert that found nothing
 * still inserts ..., also when a document started to match meanwhile") when its search found
 * nothing. FIND_WINDOW asserts that the documented window never happens: spin finds it in both
 * modes (a transaction's insert does not conflict with another document starting to match).
 */
#ifndef FLIPS
#define FLIPS 3
#endif
#ifndef ROUNDS
#define ROUNDS 3
#endif

bool exists[3];
bool match[3];
byte ver[3];         /* committed versions (atomic mode's write conflicts) */
#define ANY_MATCH (exists[0] && match[0] || exists[1] && match[1] || exists[2] && match[2])

proctype Changer() {
  byte n, d;
  do
  :: n < FLIPS ->
     atomic {
       if
       :: d = 0
       :: d = 1
       fi;
       match[d] = !match[d];
       ver[d]++;
       n++;
       printf("EV change doc=%d match=%d\n", d, match[d]);
       d = 0
     }
  :: else -> break
  od
}

proctype Upsert() {
  byte r, t, vt;
  bool found, done;
  do
  :: r < ROUNDS && !done ->
     r++;
     /* the search: find(filter, limit 1); no sort, so any matching document */
     atomic {
       found = 1;
       if
       :: exists[0] && match[0] -> t = 0
       :: exists[1] && match[1] -> t = 1
       :: exists[2] && match[2] -> t = 2
       :: else -> found = 0; t = 2
       fi;
       vt = ver[t];
       printf("EV search found=%d doc=%d\n", found, t)
     }
     /* the write, landing later */
     atomic {
       if
#ifdef ATOMIC
       /* the transaction writes T (or inserts Z): it conflicts only if that document changed after the snapshot */
       :: ver[t] != vt -> printf("EV write conflict: retried\n")
       :: found && ver[t] == vt ->
          assert(exists[t] && match[t]);                      /* SERIAL: unchanged since the snapshot */
          ver[t]++;
          done = 1;
          printf("EV write updated doc=%d\n", t)
#else
       :: found && exists[t] && match[t] ->
          ver[t]++;                                           /* SERIAL: an update of a matching document */
          done = 1;
          printf("EV write updated doc=%d\n", t)
#ifdef OLD_UPSERT
       :: found && !(exists[t] && match[t]) ->               /* the narrowed upsert inserts */
          assert(!ANY_MATCH);                                 /* SERIAL */
          exists[2] = 1; match[2] = 1; ver[2]++;
          done = 1;
          printf("EV write inserted (stray)\n")
#else
       :: found && !(exists[t] && match[t]) -> printf("EV write matched nothing\n")  /* searched again */
#endif
#endif
       :: !found && ver[t] == vt ->                           /* the upsert that can only insert */
#ifdef FIND_WINDOW
          if
          :: ANY_MATCH -> assert(false)                       /* the documented window */
          :: else -> skip
          fi;
#endif
          exists[2] = 1; match[2] = 1; ver[2]++;
          done = 1;
          printf("EV write inserted\n")
       fi
     }
  :: else -> break
  od
}

init {
  atomic {
    exists[0] = 1; match[0] = 1;
    exists[1] = 1; match[1] = 1;
    run Changer();
    run Upsert()
  }
}
