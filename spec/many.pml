/*
 * Model.lockMany on two documents, as built on branch `nextmany` (src/lock-group.ts round(),
 * LockStore.takeGroup / readGroupGrants / releaseGroup / findGroupBlockers). See spec/README.md.
 *
 * One round: a fresh token shared by the group; ONE `update` command of one statement per
 * document, each exactly the acquire's conditional upsert (free, expired or this owner's), all
 * with the command's one $$NOW (R6), run one after the other, so other commands can run between
 * two statements (R24); then, if every statement took its lock, one `find` of the records carrying
 * the token (with $$NOW) and the load, and the lease check (timed from the update's send, with the
 * find's $$NOW: the lease of the group is its shortest); the locks are handed out together.
 * Otherwise (a statement refused, a record no longer carrying the token, a lease over on arrival)
 * everything the round took is released by token (`updateMany { _id in ids, token, unexpired }`,
 * one document after the other) and the call reports LockedError (or, without wait, retries).
 * A release that fails (the connection is gone) leaves the round's locks to expire by their ttl,
 * held by no instance (the documented outcome).
 *
 * Clients: 0 (owner A) locks [D0, D1] as a group; 1 (owner B, or A with OTHER_OWNER=1: another
 * request of A) locks [D1, D0] as a group or D1 alone (Model.lock). Each runs OPS calls and keeps
 * what it was handed until it expires.
 * Invariants: LEASE and MUTEX per document (common.pml); ALL-OR-NOTHING: a call hands out both
 * locks, both current and carrying its token, or none; a refused call whose release succeeded
 * leaves no unexpired record with its token, and one whose release failed leaves only records no
 * instance believes it holds.
 * Variant NO_RELEASE (a refused round keeps what it took) must fail.
 */
#ifndef OPS
#define OPS 1
#endif
#ifndef OTHER_OWNER
#define OTHER_OWNER 2
#endif
#define MAXTOK (2 * OPS)
#define NC 2
#define ND 2
#define NO_FENCES
#include "common.pml"

#define RESET tok = 0; ok = 0; ok1 = 0

/*
 * One group round of client c on documents first, second (owner own[c], token tok).
 * `ok` ends as whether the round handed out both locks.
 */
inline groupRound(first, second) {
  atomic {
    tok = c * OPS + ops;
    SEND(c);
    readNow(c);                                   /* the update's one $$NOW, read when it starts */
    printf("EV c=%d group-send tok=%d docs=%d,%d\n", c, tok, first, second)
  }
  /* The statements, one after the other; the command's $$NOW ages while they run. */
  atomic {
    if
    :: tmo[c] -> ok = 0
    :: else -> srvAcquire(c, first, tok, 1, ok)
    fi;
    printf("EV c=%d group-stmt tok=%d doc=%d ok=%d\n", c, tok, first, ok);
    checkInv()
  }
  atomic {
    if
    :: tmo[c] -> ok1 = 0
    :: else -> srvAcquire(c, second, tok, 1, ok1)
    fi;
    ok = ok && ok1;
    printf("EV c=%d group-stmt tok=%d doc=%d ok=%d\n", c, tok, second, ok1);
    USED(c);
    checkInv()
  }
  /* readGroupGrants (its $$NOW) and the load; the lease: sent + (expiresAt - find's now) - drift. */
  atomic {
    if
    :: ok && CUR(first, tok) && CUR(second, tok) ->
       /* expiresAt - now of the find is at most TTL - (ticks since the update's reading) */
       fnew = TTL - DRIFT - sAge[c];
       if
       :: fnew > 0 ->
          hold[SLOT(c, first)] = 1; htok[SLOT(c, first)] = tok; left[SLOT(c, first)] = fnew;
          hold[SLOT(c, second)] = 1; htok[SLOT(c, second)] = tok; left[SLOT(c, second)] = fnew;
          /* ALL-OR-NOTHING, granted: both handed out, both current with this token. */
          assert(CUR(first, tok) && CUR(second, tok));
          printf("EV c=%d group-granted tok=%d left=%d\n", c, tok, fnew)
       :: else -> ok = 0; printf("EV c=%d group-late tok=%d\n", c, tok)
       fi;
       fnew = 0
    :: else -> ok = 0; printf("EV c=%d group-refused tok=%d\n", c, tok)
    fi;
    ANSWERED(c);
    checkInv()
  }
#ifndef NO_RELEASE
  if
  :: !ok ->
     /* releaseGroup: updateMany { _id in ids, token, unexpired }, one document after the other */
     atomic { readNow(c); printf("EV c=%d group-release-send tok=%d\n", c, tok) }
     if
     :: atomic {
          true ->
          if
          :: !tmo[c] && rEx[first] && rTok[first] == tok && !EXPIRED_AT(first, c) -> srvRelease(c, first, NONE, 0)
          :: else -> skip
          fi;
          checkInv()
        }
        atomic {
          if
          :: !tmo[c] && rEx[second] && rTok[second] == tok && !EXPIRED_AT(second, c) -> srvRelease(c, second, NONE, 0)
          :: else -> skip
          fi;
          printf("EV c=%d group-released tok=%d\n", c, tok);
          USED(c);
          /* ALL-OR-NOTHING, refused: nothing of this round is left held. */
          assert(!CUR(first, tok) && !CUR(second, tok));
          checkInv()
        }
     :: atomic { USED(c); printf("EV c=%d group-release-failed tok=%d\n", c, tok) }   /* the connection is gone */
     fi
  :: else -> skip
  fi;
#else
  if
  :: !ok -> assert(!CUR(first, tok) && !CUR(second, tok))
  :: else -> skip
  fi;
#endif
  /* A refused round's records are believed by no instance, whatever the release did. */
  assert(ok || !(BEL(SLOT(c, first)) && htok[SLOT(c, first)] == tok) && !(BEL(SLOT(c, second)) && htok[SLOT(c, second)] == tok))
}

/* Model.lock of one document d (as core.pml, without the give-back detail: a late grant is released). */
inline singleLock(dd) {
  atomic { tok = c * OPS + ops; SEND(c); printf("EV c=%d lock-send tok=%d doc=%d\n", c, tok, dd) }
  FAM_ARRIVE(c)
  atomic {
    if
    :: tmo[c] -> ok = 0
    :: else -> FAM_EXEC(c); srvAcquire(c, dd, tok, 1, ok)
    fi;
    printf("EV c=%d lock-exec tok=%d doc=%d ok=%d\n", c, tok, dd, ok);
    USED(c);
    checkInv()
  }
  atomic {
    if
    :: ok && TTL - DRIFT > sAge[c] ->
       hold[SLOT(c, dd)] = 1; htok[SLOT(c, dd)] = tok; left[SLOT(c, dd)] = TTL - DRIFT - sAge[c];
       printf("EV c=%d lock-granted tok=%d doc=%d\n", c, tok, dd);
       ok = 0
    :: else -> printf("EV c=%d lock-not-granted tok=%d doc=%d ok=%d\n", c, tok, dd, ok)
    fi;
    ANSWERED(c);
    checkInv()
  }
  if
  :: ok ->                                         /* late: released by owner and token */
     atomic { readNow(c) }
     atomic {
       if
       :: !tmo[c] && rEx[dd] && rOwn[dd] == own[c] && rTok[dd] == tok && !EXPIRED_AT(dd, c) -> srvRelease(c, dd, NONE, 0)
       :: else -> skip
       fi;
       USED(c);
       checkInv()
     }
  :: else -> skip
  fi
}

proctype Client(byte c) {
  byte ops, tok;
  bool ok, ok1;
  do
  :: ops < OPS ->
     ops++;
     if
     :: c == 0 -> groupRound(0, 1)
     :: c == 1 -> groupRound(1, 0)
     :: c == 1 -> singleLock(1)
     fi;
     atomic { RESET }
  :: else -> break
  od
}

init {
  atomic {
    own[0] = 1;
    own[1] = OTHER_OWNER;
    run Clock();
#ifndef NO_PURGE
    run TtlMonitor(0);
    run TtlMonitor(1);
#endif
    run Client(0);
    run Client(1)
  }
}
