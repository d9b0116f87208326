/*
 * The write guard on one document: guarded writes by a holder (doc.save, doc.saveAndUnlock) and by
 * a non-holder (an anonymous updateOne by _id), racing with lock, Model.unlock, forceUnlock,
 * renewals, expiry and the TTL monitor. See spec/README.md.
 *
 * Atomic mode (default; transactions: 'auto' on a replica set): the guard's own transaction
 * (src/guard/transaction.ts runInTransaction, src/guard/write-guard.ts check/single) whose first
 * statement writes the lock record (LockStore.verify in a transaction: { _id, token, unexpired } ->
 * a fresh `claim`; saveAndUnlock: LockStore.release; a non-holder: LockStore.claimForWrite, the
 * conditional upsert), then the document write, then the commit. Snapshot isolation as mongod
 * has it for this shape: the record's write makes the transaction its first writer until it ends;
 * another transaction's write of it fails at once with WriteConflict and is retried
 * (first-writer-wins, TransientTransactionError); a write outside a transaction (acquire, release,
 * unlock) waits until the transaction commits or aborts (R17). A transaction can be aborted at
 * any point before its commit (a transient error, transactionLifetimeLimitSeconds): it is
 * retried from its first statement, up to RETRIES times.
 * Check mode (CHECK_MODE; transactions: 'never', standalone): a read of the record with $$NOW
 * (verify / findBlocking), then the document write in a separate command.
 *
 * Clients: 0 is owner A, 1 is owner B (each: lock, then a guarded save or saveAndUnlock of the
 * document it holds, or, for B, an anonymous write); 2 is another request of A or an administrator
 * (Model.unlock(id, A) / releaseAllFor(A), forceUnlock, lock as A: a renewal elsewhere).
 *
 * WRITES: every guarded write records, when its check passed, that it is in its window; every
 * grant while a write is in its window is noted for it. When the write lands (its command executes
 * in check mode, its transaction commits in atomic mode):
 *   atomic mode: no acquisition happened in the window (no holder's write lands after another
 *     owner's acquisition; no non-holder's write lands after anyone's);
 *   check mode: if one did, the write is one of the README's windows (Limits, "Standalone servers
 *     and transactions: 'never'"): W1 the holder's lock expired, then another owner took it;
 *     W2 another request released it (Model.unlock, forceUnlock, releaseAllFor, another instance
 *     of the same acquisition), then another owner took it; W3 a non-holder's write checked while
 *     the document was free lands after someone locked it. W4 (finding F3): the same owner renewed
 *     the lock in another request (a new token) between the holder's check and its write. Any
 *     other window fails the check.
 * Variants: FIND_W1 .. FIND_W4 assert that the window never happens (spin must find it in check
 * mode, and must not in atomic mode); ADMIT_W4 counts W4 as documented; READ_VERIFY (atomic mode,
 * the holder's check a read inside the transaction, no write of the record), CLAIM_NOOP (a
 * non-holder's claim of a free record writes nothing) and OLD_ACQUIRE (with MONGOS: issue 16 item
 * 3, a lock granted behind a transaction handed out already expired) must fail.
 */
#ifndef OPS
#define OPS 2            /* client 0 (A) */
#endif
#ifndef OPS_B
#define OPS_B 1          /* client 1 (B) */
#endif
#ifndef OTHER_OPS
#define OTHER_OPS 1
#endif
#ifndef RETRIES
#define RETRIES 1
#endif
#define MAXTOK (3 * OPS)
#define NC 3
#define NO_FENCES        /* fences are core.pml's; here they would only multiply states */
#include "common.pml"

#ifndef OTHER
#define OTHER 7         /* client 2 may: 1 Model.unlock(A), 2 forceUnlock, 4 lock as A */
#endif

/* Window bookkeeping, per client: in its window (check passed, write not landed), what it saw. */
bool inWin[NC];
bool winAny[NC];     /* an acquisition was granted in the window */
bool hOther[NC];     /* an acquisition by another owner was handed out (its document loaded) in the window */
bool hAny[NC];       /* an acquisition by anyone was handed out in the window */
byte winTok[NC];     /* the token the holder's check verified (0: a non-holder's write) */

/* The transaction that holds the lock record as its first writer (client + 1), 0: none. */
byte txl;

/* A grant notes itself in every open window (atomic mode). */
inline noteGrant(c) {
#ifndef CHECK_MODE
  cj = 0;
  do
  :: cj < NC ->
     if
     :: inWin[cj] -> winAny[cj] = 1
     :: else -> skip
     fi;
     cj++
  :: else -> break
  od;
  cj = 0
#else
  skip
#endif
}

/*
 * So does its hand-out (check mode), if the acquisition is still the current one: its holder loads
 * the document now and may save over a write that lands later. (One ended before its hand-out
 * cannot write: the guard's check reads another token.)
 */
inline noteHandOut(c) {
#ifdef CHECK_MODE
  cj = 0;
  do
  :: cj < NC ->
     if
     :: inWin[cj] -> hAny[cj] = 1; hOther[cj] = hOther[cj] || own[cj] != own[c]
     :: else -> skip
     fi;
     cj++
  :: else -> break
  od;
  cj = 0
#else
  skip
#endif
}

#define OPEN_WINDOW(c, t) inWin[c] = 1; winAny[c] = 0; hAny[c] = 0; hOther[c] = 0; winTok[c] = t
#define CLOSE_WINDOW(c) inWin[c] = 0; winAny[c] = 0; hAny[c] = 0; hOther[c] = 0; winTok[c] = 0

/* Client c's write lands. */
inline land(c) {
#ifndef CHECK_MODE
  assert(!winAny[c]);
#else
  printf("EV c=%d land window=%d\n", c,
    (!hAny[c] -> 0 : (winTok[c] == 0 -> 3 : ((xt[winTok[c]] == RENEW || !hOther[c]) -> 4 : (xt[winTok[c]] == 0 -> 1 : 2)))));
  if
  :: hAny[c] && winTok[c] == 0 -> skip                                              /* W3 */
#ifdef FIND_W3
     ; assert(false)
#endif
  :: hAny[c] && winTok[c] != 0 && (xt[winTok[c]] == RENEW || !hOther[c]) ->         /* W4 */
     skip
#if !defined(ADMIT_W4) || defined(FIND_W4)
     ; assert(false)
#endif
  :: hAny[c] && winTok[c] != 0 && hOther[c] && xt[winTok[c]] == 0 ->                /* W1 */
     assert(!CUR(0, winTok[c]))
#ifdef FIND_W1
     ; assert(false)
#endif
  :: hAny[c] && winTok[c] != 0 && hOther[c] && xt[winTok[c]] != 0 && xt[winTok[c]] != RENEW ->  /* W2 */
     skip
#ifdef FIND_W2
     ; assert(false)
#endif
  :: else -> skip
  fi;
#endif
  CLOSE_WINDOW(c)
}

/* A command outside a transaction that writes the record waits for the transaction holding it. */
#define NOT_BLOCKED (txl == 0)

#define RESET tok = 0; ok = 0; giveBack = 0; try = 0; rel = 0

proctype Client(byte c) {
  byte ops, tok, try;
  bool ok, giveBack, rel;
  byte s = SLOT(c, 0);
  do
  :: ops < (c == 2 -> OTHER_OPS : (c == 1 -> OPS_B : OPS)) ->
     ops++;
     if
     /* ---- Model.lock (as in core.pml; client 2 locks as A: a renewal elsewhere) ---- */
     :: !BEL(s) && (c != 2 || (OTHER & 4)) ->
        atomic {
          tok = c * OPS + ops;
          SEND(c);
          printf("EV c=%d lock-send tok=%d\n", c, tok)
        }
        FAM_ARRIVE(c)
        atomic {
          NOT_BLOCKED || tmo[c] ->
          if
          :: tmo[c] -> ok = 0
          :: else ->
             FAM_EXEC(c);
             srvAcquire(c, 0, tok, 1, ok);
             if
             :: ok -> noteGrant(c)
             :: else -> skip
             fi
          fi;
          printf("EV c=%d lock-exec tok=%d age=%d ok=%d\n", c, tok, AGE(c), ok);
          USED(c);
          checkInv()
        }
        atomic {
          giveBack = 0;
          if
#ifdef OLD_ACQUIRE
          :: ok ->                                /* handed out whatever its age, its lease from the reply */
             hold[s] = 1;
             htok[s] = tok;
             left[s] = TTL;
#else
          :: ok && TTL - DRIFT > sAge[c] ->
             hold[s] = 1;
             htok[s] = tok;
             left[s] = TTL - DRIFT - sAge[c];
#endif
             if
             :: CUR(0, tok) -> noteHandOut(c)
             :: else -> skip
             fi;
             printf("EV c=%d lock-granted tok=%d left=%d\n", c, tok, left[s])
          :: ok && TTL - DRIFT <= sAge[c] -> giveBack = 1; printf("EV c=%d lock-late tok=%d\n", c, tok)
          :: else -> printf("EV c=%d lock-refused tok=%d\n", c, tok)
          fi;
          ANSWERED(c);
          checkInv();
          if
          :: !giveBack -> RESET
          :: else -> skip
          fi
        }
        if
        :: giveBack ->
           UPD_ARRIVE(c)
           atomic {
             NOT_BLOCKED || tmo[c] ->
             if
             :: !tmo[c] && rEx[0] && rOwn[0] == own[c] && rTok[0] == tok && !EXPIRED_AT(0, c) -> srvRelease(c, 0, NONE, 0)
             :: else -> skip
             fi;
             printf("EV c=%d giveback-exec tok=%d\n", c, tok);
             USED(c);
             checkInv();
             RESET
           }
        :: else -> skip
        fi
     /* ---- a holder's guarded save (rel = 0) or saveAndUnlock (rel = 1) ---- */
     :: c != 2 && hold[s] ->
        atomic {
          tok = htok[s];
          if
          :: rel = 0
          :: rel = 1
          fi
        }
#ifndef CHECK_MODE
        /* The guard's transaction: the record statement, then the write and the commit. */
        do
        :: atomic {
             txl == 0 || txl == c + 1 ->
             readNow(c);                        /* the statement's $$NOW (an update: at its start) */
             if
             :: txl != 0 -> ok = 0              /* unreachable: one transaction per client */
#ifdef READ_VERIFY
             :: txl == 0 && rEx[0] && rTok[0] == tok && !EXPIRED_AT(0, c) -> ok = 1   /* read only: nothing claimed */
#else
             :: txl == 0 && rEx[0] && rTok[0] == tok && !EXPIRED_AT(0, c) -> ok = 1; txl = c + 1
#endif
             :: else -> ok = 0
             fi;
             if
             :: ok -> OPEN_WINDOW(c, tok)
             :: else -> skip
             fi;
             printf("EV c=%d txn-verify tok=%d rel=%d ok=%d\n", c, tok, rel, ok);
             checkInv()
           }
           if
           :: !ok ->                            /* LockNotHeldError: aborted, nothing written */
              atomic { hold[s] = 0; USED(c); printf("EV c=%d txn-refused\n", c); checkInv() };
              break
           :: else -> skip
           fi;
           atomic {
             if
             :: !tmo[c] ->                      /* commit: the document write and the record write together */
                printf("EV c=%d txn-commit tok=%d rel=%d\n", c, tok, rel);
                land(c);
                if
                :: rel ->                       /* saveAndUnlock: RELEASE with the statement's $$NOW */
                   if
                   :: rEx[0] && rTok[0] == tok -> srvRelease(c, 0, s, tok)
                   :: else -> skip
                   fi;
                   hold[s] = 0
                :: else -> skip
                fi;
                txl = 0;
                USED(c);
                checkInv();
                ok = 1
             :: true ->                         /* aborted (a transient error, the lifetime limit) */
                printf("EV c=%d txn-abort tok=%d\n", c, tok);
                CLOSE_WINDOW(c);
                txl = (txl == c + 1 -> 0 : txl);
                USED(c);
                try++;
                ok = 0
             fi
           };
           if
           :: ok -> break
           :: !ok && try <= RETRIES -> skip      /* retried from its first statement */
           :: else -> break                      /* the retries are spent: the write failed */
           fi
        od;
#else
        /* Check mode: LockStore.verify's read with $$NOW, then the write; saveAndUnlock then releases. */
        atomic {
          readNow(c);
          ok = rEx[0] && rTok[0] == tok && !EXPIRED_AT(0, c);
          if
          :: ok -> OPEN_WINDOW(c, tok)
          :: else -> hold[s] = 0                /* LockNotHeldError / LockExpiredError */
          fi;
          printf("EV c=%d check-verify tok=%d ok=%d rel=%d\n", c, tok, ok, rel);
          USED(c);
          checkInv()
        }
        if
        :: ok ->
           atomic { printf("EV c=%d check-write tok=%d\n", c, tok); land(c) };
           if
           :: rel ->
              atomic { hold[s] = 0; readNow(c) };
              atomic {
                if
                :: !tmo[c] && rEx[0] && rTok[0] == tok && !EXPIRED_AT(0, c) -> srvRelease(c, 0, s, tok)
                :: else -> skip
                fi;
                printf("EV c=%d check-release tok=%d\n", c, tok);
                USED(c);
                checkInv()
              }
           :: else -> skip
           fi
        :: else -> skip
        fi;
#endif
        atomic { RESET }
     /* ---- B's anonymous guarded write of the document (a non-holder: updateOne({ _id })) ---- */
     :: c == 1 && !hold[s] ->
#ifndef CHECK_MODE
        do
        :: atomic {
             txl == 0 || txl == c + 1 ->
             /* claimForWrite: the conditional upsert; free = no record, or expired by $$NOW */
             readNow(c);
             if
#ifdef CLAIM_NOOP
             :: !rEx[0] || EXPIRED_AT(0, c) -> ok = 1                   /* a no-op write claims nothing */
#else
             :: !rEx[0] || EXPIRED_AT(0, c) -> ok = 1; txl = c + 1
#endif
             :: else -> ok = 0
             fi;
             if
             :: ok -> OPEN_WINDOW(c, 0)
             :: else -> skip
             fi;
             printf("EV c=%d txn-claim ok=%d\n", c, ok);
             USED(c);
             checkInv()
           }
           if
           :: !ok -> break                      /* LockedError: aborted, nothing written */
           :: else -> skip
           fi;
           atomic {
             if
             :: !tmo[c] ->                      /* the write, releaseClaims, commit */
                printf("EV c=%d txn-commit-anon\n", c);
                land(c);
                txl = (txl == c + 1 -> 0 : txl);
                ok = 1
             :: true ->
                printf("EV c=%d txn-abort-anon\n", c);
                CLOSE_WINDOW(c);
                txl = (txl == c + 1 -> 0 : txl);
                try++;
                ok = 0
             fi
           };
           if
           :: ok -> break
           :: !ok && try <= RETRIES -> skip
           :: else -> break
           fi
        od;
#else
        atomic {
          readNow(c);                           /* findBlocking: any unexpired lock */
          ok = !(rEx[0] && !EXPIRED_AT(0, c));
          if
          :: ok -> OPEN_WINDOW(c, 0)
          :: else -> skip
          fi;
          printf("EV c=%d check-blocking ok=%d\n", c, ok);
          USED(c);
          checkInv()
        }
        if
        :: ok -> atomic { printf("EV c=%d check-write-anon\n", c); land(c) }
        :: else -> skip
        fi;
#endif
        atomic { RESET }
     /* ---- Model.unlock(id, A) / releaseAllFor(A) from another request ---- */
     :: c == 2 && (OTHER & 1) ->
        UPD_ARRIVE(c)
        atomic {
          NOT_BLOCKED || tmo[c] ->
          if
          :: !tmo[c] && rEx[0] && rOwn[0] == own[c] && !EXPIRED_AT(0, c) -> srvRelease(c, 0, NONE, 0)
          :: else -> skip
          fi;
          printf("EV c=%d unlock-owner-exec\n", c);
          USED(c);
          checkInv()
        }
     /* ---- Model.forceUnlock(id) ---- */
     :: c == 2 && (OTHER & 2) ->
        UPD_ARRIVE(c)
        atomic {
          NOT_BLOCKED || tmo[c] ->
          if
          :: !tmo[c] && rEx[0] && !EXPIRED_AT(0, c) -> srvRelease(c, 0, NONE, 0)
          :: else -> skip
          fi;
          printf("EV c=%d force-exec\n", c);
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
