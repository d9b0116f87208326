/*
 * Model.lockNext on two documents, as built on branch `locknext` (src/lock-next.ts claimNext /
 * attempt, LockStore.freeCandidates / claimFree). See spec/README.md.
 *
 * One call: a candidate read (the $lookup anti-join: the documents that match the filter and have
 * no record unexpired by the read's $$NOW; on a replica set one snapshot, so at one instant, R31;
 * with NON_SNAPSHOT one document after the other, as on a standalone server or a sharded cluster,
 * R34); then for a candidate (any of those found: the pool spreads workers among them) the claim
 * (claimFree: the acquire's conditional upsert with "free or expired" only, never "mine", so two
 * workers of one owner never share a document), then the load with the filter AND the _id after
 * the lock was taken; a document that no longer matches is released by token and never proposed
 * to this call again (skip); a grant whose lease is over is released and another candidate tried.
 * The call returns the document, or null when a read found no candidate.
 *
 * Clients: 0 (owner A) and 1 (owner B; OTHER_OWNER=1: a second worker of owner A) each make one
 * lockNext call of up to ATTEMPTS claims, and keep what they got until it expires (with JOB_DONE
 * they may finish the job instead: saveAndUnlock setting a status that no longer matches). Client 2 (owner C) changes documents nobody
 * holds (a guarded write: refused while someone holds the lock), FLIPS times: a job cancelled, or
 * re-queued.
 * Invariants: LEASE and MUTEX (common.pml); ONE-CLAIMANT: no two workers believe they hold one
 * document, whatever their owners; RETURNED: the returned document matches the filter and its lock
 * is this call's, unexpired, when it is loaded; and the claim took a record nobody held;
 * NULL (with CHECK_NULL): a call returns null only if at some instant during the call no document
 * was both matching and free (an independent observer checks every state). It does not hold as
 * built (finding F4: a document the call skipped because it stopped matching is never proposed
 * to it again, also once it matches again); NULL_FIX models a fix, with which it holds.
 * Variants that must fail: NO_RECHECK (the load by _id alone), NEXT_MINE (the claim as
 * Model.lock's, "free or mine", with two workers of one owner); with CHECK_NULL, NON_SNAPSHOT
 * (reads without a snapshot: documented in R34) and the code as built (F4).
 */
#ifndef ATTEMPTS
#define ATTEMPTS 2
#endif
#ifndef FLIPS
#define FLIPS 2
#endif
#ifndef OTHER_OWNER
#define OTHER_OWNER 2
#endif
#define MAXTOK (2 * ATTEMPTS)
#define NC 3
#define ND 2
#define NO_FENCES

bool match[ND];      /* the document matches the worker's filter (status 'open') */
bool inCall[NC];     /* a lockNext call is running ... */
bool allAlong[NC];   /* ... and at every instant since it started some document matched and was free */
#define FREE_MATCH(d) (match[d] && !(rEx[d] && rRem[d] > 0))
#ifdef CHECK_NULL
#define EXTRA_CHECK \
  assert(!(BEL(SLOT(0, 0)) && BEL(SLOT(1, 0)))); \
  assert(!(BEL(SLOT(0, 1)) && BEL(SLOT(1, 1)))); \
  if \
  :: !(FREE_MATCH(0) || FREE_MATCH(1)) -> allAlong[0] = 0; allAlong[1] = 0 \
  :: else -> skip \
  fi
#else
#define EXTRA_CHECK \
  assert(!(BEL(SLOT(0, 0)) && BEL(SLOT(1, 0)))); \
  assert(!(BEL(SLOT(0, 1)) && BEL(SLOT(1, 1))))
#endif

#include "common.pml"

#define RESET tok = 0; ok = 0; k = 0; d = 0; c0 = 0; c1 = 0; skip0 = 0; skip1 = 0; res = 0

proctype Worker(byte c) {
  byte tok, k, d;
  bool ok, c0, c1, skip0, skip1;
  byte res;          /* 0 running, 1 returned a document, 2 returned null, 3 gave up */
#ifdef CHECK_NULL
  atomic { inCall[c] = 1; allAlong[c] = (FREE_MATCH(0) || FREE_MATCH(1)); printf("EV c=%d next-start\n", c) }
#endif
  do
  :: k < ATTEMPTS ->
     /* ---- the candidate read ---- */
#ifndef NON_SNAPSHOT
     atomic {
       readNow(c);
       c0 = !skip0 && match[0] && (!rEx[0] || EXPIRED_AT(0, c));
       c1 = !skip1 && match[1] && (!rEx[1] || EXPIRED_AT(1, c));
       USED(c);
       printf("EV c=%d next-read cand=%d,%d\n", c, c0, c1)
     }
#else
     atomic { readNow(c); c0 = !skip0 && match[0] && (!rEx[0] || EXPIRED_AT(0, c)); USED(c) }
     atomic { readNow(c); c1 = !skip1 && match[1] && (!rEx[1] || EXPIRED_AT(1, c)); USED(c); printf("EV c=%d next-read cand=%d,%d\n", c, c0, c1) }
#endif
#ifdef NULL_FIX
     /* (a proposed fix for finding F4) "none" only from a read that excludes nothing */
     if
     :: !c0 && !c1 && (skip0 || skip1) ->
        atomic {
          readNow(c);
          c0 = match[0] && (!rEx[0] || EXPIRED_AT(0, c));
          c1 = match[1] && (!rEx[1] || EXPIRED_AT(1, c));
          skip0 = 0;
          skip1 = 0;
          USED(c)
        }
     :: else -> skip
     fi;
#endif
     if
     :: !c0 && !c1 ->
        /* NULL: some instant of this call had no matching free document (finding F4). */
        atomic {
          res = 2;
#ifdef CHECK_NULL
          assert(!allAlong[c]);
#endif
          printf("EV c=%d next-null\n", c)
        };
        break
     :: else -> skip
     fi;
     /* ---- a candidate, claimed (claimFree) ---- */
     atomic {
       if
       :: c0 -> d = 0
       :: c1 -> d = 1
       fi;
       c0 = 0;
       c1 = 0;
       k++;
       tok = c * ATTEMPTS + k;
       SEND(c);
       printf("EV c=%d next-claim-send doc=%d tok=%d\n", c, d, tok)
     }
     FAM_ARRIVE(c)
     atomic {
       if
       :: tmo[c] -> ok = 0
       :: else ->
          FAM_EXEC(c);
          c1 = rEx[d] && rRem[d] > 0;                  /* held (unexpired) before the claim */
#ifdef NEXT_MINE
          srvAcquire(c, d, tok, 1, ok);
#else
          srvAcquire(c, d, tok, 0, ok);
#endif
          /* RETURNED (the claim): nobody held the record when it was taken */
          assert(!ok || !c1);
          c1 = 0
       fi;
       printf("EV c=%d next-claim-exec doc=%d tok=%d ok=%d\n", c, d, tok, ok);
       USED(c);
       checkInv()
     }
     /* ---- the reply, then the load with the filter AND the _id ---- */
     atomic {
       if
       :: !ok -> skip                                   /* a collision: the next candidate or a read */
#ifdef NO_RECHECK
       :: ok && TTL - DRIFT > sAge[c] ->
#else
       :: ok && match[d] && TTL - DRIFT > sAge[c] ->
#endif
          /* RETURNED: it matches, and the lock is this call's, unexpired */
          assert(match[d] && CUR(d, tok));
          hold[SLOT(c, d)] = 1;
          htok[SLOT(c, d)] = tok;
          left[SLOT(c, d)] = TTL - DRIFT - sAge[c];
          res = 1;
          printf("EV c=%d next-granted doc=%d tok=%d\n", c, d, tok)
       :: else ->                                       /* no longer matching, or too late */
          if
          :: !match[d] -> skip0 = skip0 || d == 0; skip1 = skip1 || d == 1
          :: else -> skip
          fi;
          res = 3;
          readNow(c);
          printf("EV c=%d next-giveback doc=%d tok=%d match=%d\n", c, d, tok, match[d])
       fi;
       ANSWERED(c);
       checkInv()
     }
     if
     :: res == 1 -> break
     :: res == 3 ->
        /* released by token: { _id, token, unexpired } (its $$NOW read as it is sent) */
        atomic {
          if
          :: !tmo[c] && rEx[d] && rTok[d] == tok && !EXPIRED_AT(d, c) -> srvRelease(c, d, NONE, 0)
          :: else -> skip
          fi;
          USED(c);
          res = 0;
          checkInv()
        }
     :: else -> skip
     fi
  :: else -> break                                      /* attempts spent: the call gives up (an error) */
  od;
#ifdef CHECK_NULL
  atomic { inCall[c] = 0; allAlong[c] = 0 };
#endif
#ifdef JOB_DONE
  /* ---- the job is done: saveAndUnlock with status 'done' (a guarded write, then the release) ---- */
  if
  :: res == 1 ->
     atomic {
       if
       :: CUR(d, tok) -> match[d] = 0; srvRelease(c, d, SLOT(c, d), tok)  /* readNow is not needed: now */
       :: else -> skip
       fi;
       hold[SLOT(c, d)] = 0;
       printf("EV c=%d job-done doc=%d\n", c, d);
       checkInv()
     }
  :: skip
  fi;
#endif
  atomic { RESET }
}

/* Someone changes a document nobody holds (a guarded write, refused while it is locked). */
proctype Changer(byte c) {
  byte n, d;
  do
  :: n < FLIPS ->
     atomic {
       if
       :: d = 0
       :: d = 1
       fi;
       if
       :: !(rEx[d] && rRem[d] > 0) -> match[d] = !match[d]; printf("EV c=%d change doc=%d match=%d\n", c, d, match[d])
       :: else -> skip                                 /* refused: LockedError */
       fi;
       n++;
       d = 0;
       checkInv()
     }
  :: else -> break
  od
}

init {
  atomic {
    own[0] = 1;
    own[1] = OTHER_OWNER;
    own[2] = 3;
    match[0] = 1;
    match[1] = 1;
    run Clock();
#ifndef NO_PURGE
    run TtlMonitor(0);
    run TtlMonitor(1);
#endif
    run Worker(0);
    run Worker(1);
    run Changer(2)
  }
}
