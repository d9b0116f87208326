/*
 * The core protocol on one document: Model.lock (acquire: free, expired or mine), the lease the
 * client times from when the request was sent, doc.extendLock (renew), a resume with a ticket in
 * another request, doc.unlock (release by token), Model.unlock / releaseAllFor by owner,
 * forceUnlock, expiry by the server's clock, the TTL monitor's purge, and fences.
 * See spec/README.md for the bounds, the state counts and what each invariant means.
 *
 * Clients: 0 is owner A and 1 is owner B; each runs up to OPS operations among lock, extendLock
 * and unlock. Client 2 (OTHER_OPS operations) is another request of owner A (a second tab, a later
 * web request with A's ticket, A's logout) or an administrator: it locks as A (a renewal while A
 * holds), resumes A's ticket, calls Model.unlock(id, A) / releaseAllFor(A), or forceUnlock (OTHER
 * selects which). Every command is sent, executes and is answered in separate steps, so any number
 * of ticks can pass in between (stalls, a slow network, late replies, a driver's retry after a
 * network error: the command executes once and is answered later). A reply that never arrives
 * (the call fails) leaves the client believing less than one that arrives late, and is not
 * modelled separately, except for doc.unlock (FINDING_UNLOCK_ERROR).
 *
 * Variants (spin -D...), each of which must make spin find a counterexample:
 *   OLD_ACQUIRE        a grant's lease timed from its reply, no drift allowance, handed out
 *                      whatever its age (the plugin before issue 16 item 3)
 *   NO_DRIFT           timed from the send, but without the drift allowance
 *   EXT_FROM_REPLY     an extension's lease timed from its reply
 *   RELEASE_ANY_TOKEN  doc.unlock's filter without the token
 *   FENCE_STRICT       fences must increase whatever the clocks and readings (no assumption)
 *   FENCE_CLOCK_ONLY   the assumption as divergence 6 stated it: clock lag only (finding F1)
 *   FINDING_UNLOCK_ERROR  doc.unlock that fails after the server released the lock leaves the
 *                      instance counting on it (finding F2)
 */
#ifdef NO_DRIFT
#define DRIFT 0
#endif
#ifndef OPS
#define OPS 2
#endif
#ifndef OTHER_OPS
#define OTHER_OPS 1
#endif
#define MAXTOK (3 * OPS)
#define NC 3
#include "common.pml"

/* What client 2 may do: bit 1 lock as A, 2 resume A's ticket, 4 Model.unlock(A), 8 forceUnlock. */
#ifndef OTHER
#define OTHER 15
#endif

byte ticketA;        /* the token of the last acquisition handed out to owner A: its ticket */

/* Locals are cleared after each operation, so that states differ only in what matters. */
#define RESET tok = 0; ok = 0; giveBack = 0

proctype Client(byte c) {
  byte ops, tok;
  bool ok, giveBack;
  byte s = SLOT(c, 0);
  do
  :: ops < (c == 2 -> OTHER_OPS : OPS) ->
     ops++;
     if
     /* ---- Model.lock / tryLock (one attempt; a wait is several) ---- */
     :: !BEL(s) && (c != 2 || (OTHER & 1)) ->
        atomic {
          tok = c * OPS + ops;
          SEND(c);
          printf("EV c=%d lock-send tok=%d\n", c, tok)
        }
        FAM_ARRIVE(c)
        atomic {
          if
          :: tmo[c] -> ok = 0
          :: else ->
             FAM_EXEC(c);
             srvAcquire(c, 0, tok, 1, ok)
          fi;
          printf("EV c=%d lock-exec tok=%d age=%d ok=%d\n", c, tok, AGE(c), ok);
          USED(c);
          checkInv()
        }
        atomic {
          giveBack = 0;
          if
          :: ok ->
#ifdef OLD_ACQUIRE
             fnew = TTL;                         /* from the reply: expiresAt - $$NOW */
#else
             fnew = TTL - DRIFT - sAge[c];       /* sent + (expiresAt - $$NOW) - drift */
#endif
             if
             :: fnew > 0 ->
                hold[s] = 1;
                htok[s] = tok;
                left[s] = fnew;
                if
                :: own[c] == 1 -> ticketA = tok
                :: else -> skip
                fi;
                printf("EV c=%d lock-granted tok=%d left=%d\n", c, tok, fnew)
             :: else ->
                giveBack = 1;                    /* arrived too late: released by its token */
                printf("EV c=%d lock-late tok=%d\n", c, tok)
             fi
          :: else -> printf("EV c=%d lock-refused tok=%d\n", c, tok)
          fi;
          fnew = 0;
          ANSWERED(c);
          checkInv();
          if
          :: !giveBack -> RESET
          :: else -> skip
          fi
        }
        if
        :: giveBack ->
           /* LockStore.releaseHeld(id, owner, token): { _id, owner, token, unexpired } -> RELEASE */
           UPD_ARRIVE(c)
           atomic {
             if
             :: !tmo[c] && rEx[0] && rOwn[0] == own[c] && rTok[0] == tok && !EXPIRED_AT(0, c) -> srvRelease(c, 0, NONE, 0)
             :: else -> skip
             fi;
             printf("EV c=%d giveback-exec tok=%d age=%d\n", c, tok, AGE(c));
             USED(c);
             checkInv();
             RESET
           }
        :: else -> skip
        fi
     /* ---- doc.extendLock(): { _id, token, unexpired } -> expiresAt = $$NOW + ttl ---- */
     :: c != 2 && hold[s] ->
        atomic {
          tok = htok[s];
          SEND(c);
#ifndef EXT_FROM_REPLY
          /* startExtension: until the answer, count on what both the lease and the extension give */
          if
          :: left[s] > TTL - DRIFT -> left[s] = TTL - DRIFT
          :: else -> skip
          fi;
#endif
          printf("EV c=%d extend-send tok=%d\n", c, tok)
        }
        FAM_ARRIVE(c)
        atomic {
          if
          :: tmo[c] -> ok = 0
          :: else ->
             FAM_EXEC(c);
             if
             :: rEx[0] && rTok[0] == tok && !EXPIRED_AT(0, c) -> srvExtend(c, 0); ok = 1
             :: else -> ok = 0
             fi
          fi;
          printf("EV c=%d extend-exec tok=%d age=%d ok=%d\n", c, tok, AGE(c), ok);
          USED(c);
          checkInv()
        }
        atomic {
          if
          :: ok ->
#ifdef EXT_FROM_REPLY
             left[s] = TTL - DRIFT;
#else
             left[s] = (TTL - DRIFT > sAge[c] -> TTL - DRIFT - sAge[c] : 0);
#endif
             if
             :: left[s] == 0 -> hold[s] = 0     /* too late to count on: given up */
             :: else -> skip
             fi
          :: else -> hold[s] = 0                 /* refused: the instance learns the lock is gone */
          fi;
          printf("EV c=%d extend-reply tok=%d left=%d\n", c, tok, left[s]);
          ANSWERED(c);
          checkInv();
          RESET
        }
     /* ---- doc.unlock(): { _id, token, unexpired } -> RELEASE ---- */
     :: c != 2 && hold[s] ->
        atomic {
          tok = htok[s];
#ifndef FINDING_UNLOCK_ERROR
          hold[s] = 0;                           /* the holder stops counting on the lock when it asks to release it */
#endif
          printf("EV c=%d unlock-send tok=%d\n", c, tok);
          readNow(c)                             /* an update's $$NOW: read when it starts */
        }
        atomic {
#ifdef RELEASE_ANY_TOKEN
          if
          :: !tmo[c] && rEx[0] && !EXPIRED_AT(0, c) -> srvRelease(c, 0, s, tok)
          :: else -> skip
          fi;
#else
          if
          :: !tmo[c] && rEx[0] && rTok[0] == tok && !EXPIRED_AT(0, c) -> srvRelease(c, 0, s, tok)
          :: else -> skip
          fi;
#endif
          printf("EV c=%d unlock-exec tok=%d age=%d\n", c, tok, AGE(c));
          USED(c);
          checkInv();
#ifdef FINDING_UNLOCK_ERROR
          if
          :: hold[s] = 0                         /* answered */
          :: skip                                /* the reply is lost: LockDatabaseError, state.lost stays undefined */
          fi;
#endif
          RESET
        }
     /* ---- a resume with A's ticket in another request: { _id, owner, token, unexpired } ---- */
     :: c == 2 && (OTHER & 2) && ticketA != 0 && !BEL(s) ->
        atomic {
          tok = ticketA;
          SEND(c);
          printf("EV c=%d resume-send tok=%d\n", c, tok)
        }
        FAM_ARRIVE(c)
        atomic {
          if
          :: tmo[c] -> ok = 0
          :: else ->
             FAM_EXEC(c);
             if
             :: rEx[0] && rOwn[0] == own[c] && rTok[0] == tok && !EXPIRED_AT(0, c) -> srvExtend(c, 0); ok = 1
             :: else -> ok = 0
             fi
          fi;
          printf("EV c=%d resume-exec tok=%d age=%d ok=%d\n", c, tok, AGE(c), ok);
          USED(c);
          checkInv()
        }
        atomic {
          if
          :: ok && TTL - DRIFT > sAge[c] ->
             hold[s] = 1;
             htok[s] = tok;
             left[s] = TTL - DRIFT - sAge[c];
             printf("EV c=%d resume-granted tok=%d left=%d\n", c, tok, left[s])
          :: else -> printf("EV c=%d resume-not-granted tok=%d ok=%d\n", c, tok, ok)
          fi;
          ANSWERED(c);
          checkInv();
          RESET
        }
     /* ---- Model.unlock(id, A) / releaseAllFor(A) from another request: { owner, unexpired } ---- */
     :: c == 2 && (OTHER & 4) ->
        atomic {
          printf("EV c=%d unlock-owner-send\n", c);
          readNow(c)
        }
        atomic {
          if
          :: !tmo[c] && rEx[0] && rOwn[0] == own[c] && !EXPIRED_AT(0, c) -> srvRelease(c, 0, NONE, 0)
          :: else -> skip
          fi;
          printf("EV c=%d unlock-owner-exec age=%d\n", c, AGE(c));
          USED(c);
          checkInv()
        }
     /* ---- Model.forceUnlock(id) (an administrator): { _id, unexpired } ---- */
     :: c == 2 && (OTHER & 8) ->
        atomic {
          printf("EV c=%d force-send\n", c);
          readNow(c)
        }
        atomic {
          if
          :: !tmo[c] && rEx[0] && !EXPIRED_AT(0, c) -> srvRelease(c, 0, NONE, 0)
          :: else -> skip
          fi;
          printf("EV c=%d force-exec age=%d\n", c, AGE(c));
          USED(c);
          checkInv()
        }
     fi
  :: else -> break
  od
}

init {
  atomic {
    own[0] = 1;
    own[1] = 2;
    own[2] = 1;
    mFr[0] = FMIN;
    run Clock();
    run TtlMonitor(0);
    run Client(0);
    run Client(1);
    run Client(2)
  }
}
