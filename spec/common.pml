/*
 * Shared by every model in spec/ (core.pml, guard.pml, next.pml, many.pml): time, the clients'
 * clocks, the lock record of each document, the server's side of each lock command, and the
 * invariants every model checks. Read spec/README.md first.
 *
 * TIME is discrete and unbounded: a Clock process ticks forever, between any two steps of any
 * process. Nothing stores an absolute time: every time is kept relative to now (how long until a
 * record expires, how old a $$NOW reading is, how long a lease has left), shifted at each tick and
 * saturated at a cap beyond which no comparison the protocol makes can change. So states that
 * differ only by a shift in time are one state, and the check covers runs of any length.
 * A client's monotonic clock either advances with the server's at a tick or (while lag[c] < DMAX)
 * does not: over a run it loses at most DMAX ticks against the server's. (A fast client clock only
 * shortens its leases, and is not modelled.)
 *
 * The parameters (spin -DNAME=value):
 *   NC     clients                  ND     documents
 *   TTL    ttl of every lock, in ticks
 *   DMAX   ticks a client's clock may lose over a run
 *   DRIFT  the lease's drift allowance (the code: 1% of the lease + 2 ms); DMAX by default
 *   PURGE  purgeAfter: the TTL monitor deletes a record PURGE ticks after it expired
 *   SKEW   how far the clock that reads $$NOW (or runs the TTL monitor) may lag true time:
 *          several nodes or routers with skewed clocks (0: one clock)
 *   AGEMAX a $$NOW reading is at most AGEMAX ticks old when its command executes (lag and
 *          waiting together); a command that would wait longer times out without executing
 *   MONGOS defined: mongos's $$NOW rule (one reading when the router receives a command, used by
 *          every attempt); undefined: mongod's (findAndModify reads $$NOW at each attempt, update
 *          once when the command starts). docs/mongodb-compatibility.md R6.
 */
#ifndef NC
#define NC 3
#endif
#ifndef ND
#define ND 1
#endif
#ifndef TTL
#define TTL 3
#endif
#ifndef DMAX
#define DMAX 1
#endif
#ifndef DRIFT
#define DRIFT DMAX
#endif
#ifdef NO_PURGE            /* no TTL monitor: records are never deleted (an expired one is free all the same) */
#define PURGE 0
#endif
#ifndef PURGE
#define PURGE 2
#endif
#ifndef SKEW
#define SKEW 0
#endif
#ifndef AGEMAX
#define AGEMAX (TTL + 1)
#endif
/* Tokens: each acquisition attempt gets a fresh one; a model numbers them 1..MAXTOK statically. */
#ifndef MAXTOK
#define MAXTOK 9
#endif
/*
 * NEXT_FENCE = max(previous + 1, $$NOW in microseconds): FK fence units per tick. FK exceeds the
 * number of grants a run can make, as 1000 units per millisecond exceed the grants one document
 * gets in a millisecond (docs/mongodb-compatibility.md, divergence 6: the +1 steps).
 */
#define FK (MAXTOK + 1)
/* Caps: a remaining time or a fence (relative to now) below these compares like any lower value. */
#define RMIN (-(AGEMAX + PURGE + SKEW + 1))
#define FMIN (-(AGEMAX * FK) - 1)
#define NS (NC * ND)
#define SLOT(c, d) ((c) * ND + (d))
#define NONE 255
#define RENEW 254       /* xt[t]: acquisition t was renewed (a new token) by the same owner elsewhere */

/* Owners: 1 = A, 2 = B, 3 = C (0: none, a released record). */
byte own[NC];

/* The lock record of each document: { _id, owner, token, fence, expiresAt } or absent (rEx). */
bool rEx[ND];
byte rOwn[ND];
byte rTok[ND];
short rRem[ND];      /* expiresAt - now, down to RMIN */
short rFr[ND];       /* fence - now * FK, down to FMIN */
short mFr[ND];       /* (the highest fence ever issued for the document) - now * FK, down to FMIN */

/*
 * The lock each client's instance of each document carries (a document returned by Model.lock,
 * lockNext, lockMany, a resume): its token and its lease. The client believes it holds the lock
 * while hold && left > 0, left being what its lease has left on the client's clock.
 * xt[t]: the acquisition t was ended on the server, while unexpired, by a command that no instance
 * of it sent (NONE: another request's Model.unlock, releaseAllFor, forceUnlock, a renewal by the
 * same owner elsewhere) or that instance slot xt[t] - 1 sent (its doc.unlock: other instances of
 * t, a resumed one, are not told); 0: it was not. An instance cannot know about such an end until
 * it next talks to the server.
 */
bool hold[NS];
byte htok[NS];
byte left[NS];
byte xt[MAXTOK + 1];
#define BEL(s) (hold[s] && left[s] > 0)
#if ND == 1
#define ANYLEASE(c) (left[c] > 0)
#elif ND == 2
#define ANYLEASE(c) (left[SLOT(c, 0)] > 0 || left[SLOT(c, 1)] > 0)
#else
#define ANYLEASE(c) (left[SLOT(c, 0)] > 0 || left[SLOT(c, 1)] > 0 || left[SLOT(c, 2)] > 0)
#endif
/* The acquisition of slot s was ended by another request. */
#define EXT(s) (xt[htok[s]] != 0 && xt[htok[s]] != (s) + 1)
/* The acquisition t is the current one of document d, unexpired by the server's clock. */
#define CUR(d, t) (rEx[d] && rTok[d] == (t) && rRem[d] > 0)

/* Each client's clock and its command in flight. */
byte lag[NC];        /* ticks client c's clock has lost */
bool fly[NC];        /* a granting command of client c is in flight ... */
byte sAge[NC];       /* ... sent this many ticks ago on the client's clock (up to TTL) */
bool pend[NC];       /* the command in flight has read $$NOW ... */
byte nAge[NC];       /* ... this many ticks ago */
bool tmo[NC];        /* ... and waited too long: it times out without executing */

/*
 * The age of the oldest $$NOW reading used so far (by a grant, a release, an extension, or the TTL
 * monitor) when its command executed: its clock's lag plus the time the command waited after
 * reading it (R6). The fence-after-purge assumption bounds it.
 */
#ifndef NO_FENCES
byte maxLag;
#define NOTE_LAG(a) if :: (a) > maxLag -> maxLag = (a) :: else -> skip fi
#else
#define NOTE_LAG(a) skip
#endif

byte ci;             /* scratch, always 0 between steps */
byte cj;
short fnew;

/*
 * The invariants checked after every step that changes time, a record or an instance.
 *  LEASE (PRODUCT.md property 13): an instance that believes it holds a lock holds the current,
 *    unexpired acquisition on the server, unless another request ended it (EXT).
 *  MUTEX (property 1, as the clients believe it): no two instances of different owners both
 *    believe they hold one document (unless another request ended one of them).
 * With SKEW > 0 several clocks judge expiry (divergence 3): only fences are checked.
 */
inline checkInv() {
#if SKEW == 0
  d_step {
    ci = 0;
    do
    :: ci < NS ->
       assert(!BEL(ci) || EXT(ci) || CUR(ci % ND, htok[ci]));
       cj = ci + 1;
       do
       :: cj < NS ->
          assert(!(ci % ND == cj % ND && own[ci / ND] != own[cj / ND] && BEL(ci) && !EXT(ci) && BEL(cj) && !EXT(cj)));
          cj++
       :: else -> break
       od;
       ci++
    :: else -> break
    od;
    ci = 0;
    cj = 0
#ifdef EXTRA_CHECK
    ;
    EXTRA_CHECK
#endif
  }
#else
  skip
#endif
}

/* Client c's command reads $$NOW: now, or with SKEW up to SKEW ticks behind. */
inline readNow(c) {
  pend[c] = 1;
  nAge[c] = 0;
#if SKEW > 0
  do
  :: nAge[c] < SKEW -> nAge[c]++
  :: break
  od;
#endif
}

/*
 * $$NOW of a command (R6). ARRIVE where the command reaches the server (or the router), EXEC where
 * it executes; any number of ticks may pass in between (a network delay between router and
 * shard, a wait behind a transaction's uncommitted write).
 *  - findAndModify (acquire, resume, extend, claims): on mongod each attempt reads the clock as
 *    it runs; through mongos the router's reading serves every attempt.
 *  - update (release, unlock, forceUnlock, releaseAllFor): one reading when the command starts,
 *    on mongod and through mongos.
 * An execution step starts with EXECUTABLE(c): a command whose reading grew too old timed out.
 */
#ifdef MONGOS
#define FAM_ARRIVE(c) atomic { readNow(c) };
#define FAM_EXEC(c) skip
#else
#define FAM_ARRIVE(c)
#define FAM_EXEC(c) readNow(c)
#endif
#define UPD_ARRIVE(c) atomic { readNow(c) };
/* The reading's age, the comparison "expiresAt <= $$NOW" and a time "$$NOW + x" relative to now. */
#define AGE(c) nAge[c]
#define EXPIRED_AT(d, c) (rRem[d] <= -nAge[c])
#define NOW_PLUS(c, x) ((x) - nAge[c])
/* The reading was used (or the command timed out). */
#define USED(c) pend[c] = 0; nAge[c] = 0; tmo[c] = 0
/* A granting command is sent; its reply arrived. */
#define SEND(c) fly[c] = 1; sAge[c] = 0
#define ANSWERED(c) fly[c] = 0; sAge[c] = 0

/* Time passes: one tick. Everything relative to now shifts; each client's clock may stand still. */
proctype Clock() {
end:
  do
  :: atomic {
       ci = 0;
       do
       :: ci < ND ->
          if
          :: rEx[ci] && rRem[ci] > RMIN -> rRem[ci]--
          :: else -> skip
          fi;
#ifndef NO_FENCES
          if
          :: rEx[ci] -> rFr[ci] = (rFr[ci] - FK < FMIN -> FMIN : rFr[ci] - FK)
          :: else -> skip
          fi;
          mFr[ci] = (mFr[ci] - FK < FMIN -> FMIN : mFr[ci] - FK);
#endif
          ci++
       :: else -> break
       od;
       ci = 0;
       do
       :: ci < NC ->
          if
          :: pend[ci] && nAge[ci] < AGEMAX -> nAge[ci]++
          :: pend[ci] && nAge[ci] == AGEMAX -> tmo[ci] = 1
          :: else -> skip
          fi;
          /* Only a clock something depends on (a command in flight, a lease) may stand still. */
          if
          :: lag[ci] < DMAX && (fly[ci] || ANYLEASE(ci)) -> lag[ci]++   /* client ci's clock stands still */
          :: true ->                                                    /* client ci's clock advances */
             if
             :: fly[ci] && sAge[ci] < TTL -> sAge[ci]++
             :: else -> skip
             fi;
             cj = 0;
             do
             :: cj < ND ->
                if
                :: left[SLOT(ci, cj)] > 0 -> left[SLOT(ci, cj)]--
                :: else -> skip
                fi;
                cj++
             :: else -> break
             od;
             cj = 0
          fi;
          ci++
       :: else -> break
       od;
       ci = 0;
       printf("EV tick\n");
       checkInv()
     }
  od
}

/*
 * The current acquisition of document d, if unexpired, ends by a command that no instance of it
 * sent, in one of the ways the README documents (by = NONE: another request's Model.unlock or
 * releaseAllFor of the same owner, forceUnlock; RENEW: a renewal by the same owner), or by instance slot
 * `by`'s release of its acquisition t (the other instances of t, a resumed one, are not told).
 * Any other end (a release of another acquisition) is excused for nobody. (An acquisition that
 * already expired ended by time: the leases of its instances must be over, as LEASE checks.)
 */
inline endCurrent(d, by, t) {
  if
  :: rEx[d] && rTok[d] != 0 && rRem[d] > 0 && (by == NONE || by == RENEW) -> xt[rTok[d]] = by
  :: rEx[d] && rTok[d] != 0 && rRem[d] > 0 && by != NONE && by != RENEW && rTok[d] == t -> xt[rTok[d]] = by + 1
  :: else -> skip
  fi
}

/*
 * The acquire's pipeline (LockStore.acquire, src/lock-store.ts) as client c's command executes
 * with its $$NOW reading: filter { _id } with upsert; every field a $cond on EXPIRED_EXPR (no
 * record, or expiresAt <= $$NOW: a released record carries the release's $$NOW) or, when `mine`,
 * owner == this owner (a renewal; lockNext's claimFree passes 0). Granted: owner, the fresh token,
 * fence = NEXT_FENCE = max(previous + 1, $$NOW * FK) (without a record: $$NOW * FK, time starting
 * at 1), expiresAt = $$NOW + ttl. Refused: the record unchanged (a no-op, R5).
 */
inline srvAcquire(c, d, tok, mine, ok) {
  NOTE_LAG(AGE(c));
  if
  :: !rEx[d] || EXPIRED_AT(d, c) || (mine && rOwn[d] == own[c]) ->
     endCurrent(d, RENEW, 0);   /* only a renewal by the same owner takes a lock still held */
#ifndef NO_FENCES
     fnew = -(AGE(c) * FK);
     if
     :: rEx[d] && rFr[d] + 1 > fnew -> fnew = rFr[d] + 1
     :: else -> skip
     fi;
     /*
      * FENCE: every fence is above every fence issued before for the document. While the record
      * exists the $max makes it so; after a purge it needs divergence 6's assumption: no reading
      * PURGE / 2 ticks old, a reading's age counting the command's wait as well as its clock's
      * lag (finding F1).
      */
#if defined(FENCE_STRICT)
     assert(fnew > mFr[d]);
#elif defined(FENCE_CLOCK_ONLY)
     assert(fnew > mFr[d] || 2 * SKEW >= PURGE);
#else
     assert(fnew > mFr[d] || 2 * maxLag >= PURGE);
#endif
     if
     :: fnew > mFr[d] -> mFr[d] = fnew
     :: else -> skip
     fi;
     rFr[d] = fnew;
     fnew = 0;
#endif
     rEx[d] = 1;
     rOwn[d] = own[c];
     rTok[d] = tok;
     rRem[d] = NOW_PLUS(c, TTL);
     ok = 1
  :: else -> ok = 0
  fi
}

/*
 * RELEASE as client c's command executes: expiresAt = $$NOW, owner and token cleared, fence kept.
 * by, t: see endCurrent.
 */
inline srvRelease(c, d, by, t) {
  NOTE_LAG(AGE(c));
  endCurrent(d, by, t);
  rOwn[d] = 0;
  rTok[d] = 0;
  rRem[d] = NOW_PLUS(c, 0)
}

/* Extend or resume: expiresAt = $$NOW + ttl. */
inline srvExtend(c, d) {
  NOTE_LAG(AGE(c));
  rRem[d] = NOW_PLUS(c, TTL)
}

/* The TTL monitor deletes document d's record PURGE ticks after its expiry, by its own clock. */
proctype TtlMonitor(byte d) {
  byte k;
end:
  do
  :: atomic {
       rEx[d] && rRem[d] <= -PURGE ->
       k = 0;
#if SKEW > 0
       do
       :: k < SKEW -> k++
       :: break
       od;
#endif
       if
       :: rRem[d] <= -PURGE - k ->
          NOTE_LAG(k);
          rEx[d] = 0;
          rOwn[d] = 0;
          rTok[d] = 0;
          rRem[d] = 0;
          rFr[d] = 0;
          printf("EV purge doc=%d\n", d)
       :: else -> skip
       fi;
       k = 0
     }
  od
}
