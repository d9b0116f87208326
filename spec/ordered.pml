/*
 * Ordered waiting of lockMany / lockAll (issue 17 item 2; src/lock-group.ts waitInOrder,
 * src/group-reservation.ts): untimed, who waits for whom. Exclusion itself is many.pml's (every
 * take below is one atomic conditional write, as cmd-take-group's statements are).
 *
 * Two documents, D0 < D1 in canonical order. Two waiting groups need both; group 1 lists them
 * as [D1, D0] (opposite to group 0). Each group, per round:
 *   - tries both at once (the fast path; refused if either is held or reserved by someone else);
 *   - then goes ordered: holds the longest canonical prefix, reserves the first document it lacks
 *     (only when nobody else's reservation is on it: the first waiter keeps it), takes it once it
 *     is free and not reserved by another, and so on;
 *   - BOUND: while it holds a non-empty prefix and is blocked, it may give everything back (its
 *     reservation too) and start the round again (the hold bound; untimed: at any such moment).
 * USER: a caller outside the order (user code, a lockNext worker) that holds D1 and then waits
 * for D0, with plain locks: it takes a free document only when no reservation is on it. (A lockNext
 * worker ignores reservations, src/lock-store.ts claimFree: it takes any free document, which only
 * removes waits-for edges, so this stricter USER covers it for NO-DEADLOCK.)
 *
 * NO-DEADLOCK (assert in the watchdog): whenever nothing can move (spin's `timeout`), every
 * process has finished its rounds. Livelock (give-ups that repeat for ever) is not checked here:
 * the code breaks it with a random back-off and a bound of 2 s, then 4 s (holdBound).
 *
 * OLDEST (src/group-reservation.ts, src/single-waiter-reservation.ts): every waiter takes a
 * `since` at its call's first refusal (a global clock stands for the server's), and a reserve takes
 * over a live reservation of a YOUNGER waiter ((since, id) smaller) instead of only a free slot;
 * the USER caller's two lock calls wait as single-document waiters that reserve the one document
 * each waits for; SINGLE adds a single-document waiter for D0 alone.
 *
 * NEXT (with OLDEST; src/next-reservation.ts): a waiting lockNext worker (id 14) whose filter
 * matches D0 only (match[]), and a Job step that may mark D0 done (no longer matching) at any
 * moment. The worker claims a free matching document whatever its reservation (claimFree), gives
 * it back if the load finds it not matching, and, finding none free, reserves the first HELD match
 * (oldest keeps it, as every waiter) and checks after every such read that the document it
 * reserved still matches, dropping the reservation when it does not. It waits for a match as long
 * as it likes (its `wait`): at a timeout it may be the one process left, waiting with nothing
 * matching and free. NEXT_KEEPS (the broken variant): it keeps its reservation when the document
 * stops matching; a waiter for D0 then waits for ever behind a reservation of a document the worker
 * will never take.
 *
 * Switches: -DUSER (the user caller), -DOLDEST, -DSINGLE (with OLDEST), -DNEXT (with OLDEST), -DNEXT_KEEPS, -DNO_BOUND (no give-up), -DRESERVE_ALL (the earlier design,
 * branch fair2: a waiting group holds nothing and reserves every document it needs, taking all at
 * once when all are free), -DLISTED_ORDER (groups hold prefixes of their listed order instead of
 * the canonical one), -DROUNDS=n.
 */
#ifndef ROUNDS
#define ROUNDS 1
#endif
#define N 2
#define NONE 255

byte holder[N];   /* NONE: free; else the process id */
byte resv[N];     /* NONE: no live reservation; else the group id */
byte done = 0;
#ifdef OLDEST
byte clock = 0;
byte since[5];    /* per waiter (id - 10): the clock at its call's first refusal; 0: not refused yet */
/* Waiter a is older than waiter b: an earlier since, or the same one and a smaller id (a total order). */
#define OLDER(a, b) (since[(a) - 10] < since[(b) - 10] || (since[(a) - 10] == since[(b) - 10] && (a) < (b)))
/* May `me` reserve d now: not its own already, and no live reservation or a younger waiter's. */
#define MAY_RESERVE(d, me) (resv[d] != me && (resv[d] == NONE || OLDER(me, resv[d])))
#define FIRST_REFUSAL(me) if :: since[(me) - 10] == 0 -> clock++; since[(me) - 10] = clock :: else -> skip fi
#else
#define MAY_RESERVE(d, me) (resv[d] == NONE)
#define FIRST_REFUSAL(me) skip
#endif

/* A free document the caller `me` may take: no reservation, or its own. */
#define TAKEABLE(d, me) (holder[d] == NONE && (resv[d] == NONE || resv[d] == me))

proctype Group(byte me; byte first) {
  byte r = 0;
  byte k;          /* how many documents of its order it holds (a prefix) */
  byte d;          /* the document it waits for */
  byte i;
  do
  :: r == ROUNDS -> break
  :: else ->
    k = 0;
#ifdef OLDEST
    since[me - 10] = 0;   /* a new call */
#endif
    /* the fast path: both at once, or nothing */
    atomic { if :: TAKEABLE(0, me) && TAKEABLE(1, me) -> holder[0] = me; holder[1] = me; k = N :: else -> FIRST_REFUSAL(me) fi }
    do
    :: k == N -> break
    :: else ->
#ifdef LISTED_ORDER
      d = (k == 0 -> first : 1 - first);
#else
      d = k;
#endif
#ifdef RESERVE_ALL
      /* fair2: reserve every document (first waiter keeps each), hold nothing, take all at once */
      atomic {
        if :: resv[0] == NONE -> resv[0] = me :: else -> skip fi;
        if :: resv[1] == NONE -> resv[1] = me :: else -> skip fi
      };
      atomic { TAKEABLE(0, me) && TAKEABLE(1, me) -> holder[0] = me; holder[1] = me; k = N;
               if :: resv[0] == me -> resv[0] = NONE :: else -> skip fi;
               if :: resv[1] == me -> resv[1] = NONE :: else -> skip fi }
#else
      if
      :: atomic { TAKEABLE(d, me) -> holder[d] = me; k++; if :: resv[d] == me -> resv[d] = NONE :: else -> skip fi }
      :: atomic { !TAKEABLE(d, me) && MAY_RESERVE(d, me) -> resv[d] = me }   /* reserve the one it waits for */
#ifndef NO_BOUND
      :: atomic { k > 0 && !TAKEABLE(d, me) ->                            /* the hold bound: give it all back */
           i = 0;
           do :: i < N -> if :: holder[i] == me -> holder[i] = NONE :: else -> skip fi;
                          if :: resv[i] == me -> resv[i] = NONE :: else -> skip fi; i++
              :: else -> break od;
           k = 0 }
#endif
      fi
#endif
    od;
    /* served: the section, then the release */
    atomic { holder[0] = NONE; holder[1] = NONE; r++ }
  od;
  atomic { done++ }
}

#ifdef OLDEST
/* One `lock(d, { wait })` of waiter `me`: takes d once takeable, else reserves it (oldest keeps it). */
inline waitSingle(d, me) {
  since[me - 10] = 0;
  do
  :: atomic { TAKEABLE(d, me) -> holder[d] = me; if :: resv[d] == me -> resv[d] = NONE :: else -> skip fi; break }
  :: atomic { !TAKEABLE(d, me) && since[me - 10] == 0 -> FIRST_REFUSAL(me) }
  :: atomic { !TAKEABLE(d, me) && since[me - 10] != 0 && MAY_RESERVE(d, me) -> resv[d] = me }
  od
}
#endif

#ifdef USER
proctype User(byte me) {
  byte r = 0;
  do
  :: r == ROUNDS -> break
  :: else ->
#ifdef OLDEST
    waitSingle(1, me);
    waitSingle(0, me);
#else
    atomic { TAKEABLE(1, me) -> holder[1] = me };
    atomic { TAKEABLE(0, me) -> holder[0] = me };
#endif
    atomic { holder[0] = NONE; holder[1] = NONE; r++ }
  od;
  atomic { done++ }
}
#endif

#ifdef SINGLE
proctype Single(byte me) {
  byte r = 0;
  do
  :: r == ROUNDS -> break
  :: else ->
    waitSingle(0, me);
    atomic { holder[0] = NONE; r++ }
  od;
  atomic { done++ }
}
#endif

#ifdef NEXT
bit match[N];          /* the worker's filter matches the document */
bit nextWaiting = 0;   /* the worker's call is still waiting */

/* A free matching document the worker may claim (claims ignore reservations). */
#define CLAIMABLE(d) (holder[d] == NONE && match[d])
#define NONE_FREE (!CLAIMABLE(0) && !CLAIMABLE(1))
#define HELD_MATCH(d) (holder[d] != NONE && match[d])

proctype Next(byte me) {
  byte t = NONE;   /* the document its reservation is of (asked for), if any */
  byte c;          /* the candidate it claims */
  since[me - 10] = 0;
  nextWaiting = 1;
  /* end_: blocked here, the worker is waiting (a valid end state: the Watchdog says whether alone) */
end_waiting:
  do
  /* a read found c free and matching; the claim (atomic: free, whatever the reservation) */
  :: atomic { CLAIMABLE(0) -> c = 0 } ->
     atomic { if :: holder[c] == NONE -> holder[c] = me :: else -> c = NONE fi }
     /* the load, with the filter: a document that no longer matches is given back */
     if
     :: c == NONE -> skip
     :: else -> atomic { if :: match[c] -> break :: else -> holder[c] = NONE fi }
     fi
  :: atomic { CLAIMABLE(1) -> c = 1 } ->
     atomic { if :: holder[c] == NONE -> holder[c] = me :: else -> c = NONE fi }
     if
     :: c == NONE -> skip
     :: else -> atomic { if :: match[c] -> break :: else -> holder[c] = NONE fi }
     fi
  /* none free: the check of its reservation (reservedCandidateState). Enabled only when it changes
     something, so a waiting worker blocks (spin's timeout sees it waiting). */
#ifndef NEXT_KEEPS
  :: atomic { NONE_FREE && t != NONE && !match[t] ->
       if :: resv[t] == me -> resv[t] = NONE :: else -> skip fi; t = NONE }
#endif
  /* none free, no reservation: the first held match (firstHeldCandidate), reserved (oldest keeps it) */
  :: atomic { NONE_FREE && t == NONE && (HELD_MATCH(0) || HELD_MATCH(1)) ->
       FIRST_REFUSAL(me);
       if :: HELD_MATCH(0) -> t = 0 :: else -> t = 1 fi;
       if :: MAY_RESERVE(t, me) -> resv[t] = me :: else -> skip fi }
  /* its renewal: takes the reservation over from a younger waiter, or when it was cleared */
  :: atomic { t != NONE && MAY_RESERVE(t, me) -> resv[t] = me }
  od;
  /* claimed c: the call ends (its reservation cleared), the section, the release */
  atomic { nextWaiting = 0; if :: t != NONE && resv[t] == me -> resv[t] = NONE :: else -> skip fi };
  atomic { holder[c] = NONE; done++ }
}

/* The job D0 may be finished (no longer matching the worker's filter) at any moment, or never. */
proctype Job() {
  if :: atomic { match[0] = 0 } :: skip fi;
  atomic { done++ }
}
#endif

#ifdef USER
#ifdef SINGLE
#define PROCS 4
#else
#define PROCS 3
#endif
#else
#ifdef SINGLE
#define PROCS 3
#else
#define PROCS 2
#endif
#endif

#ifdef NEXT
#define ALL (PROCS + 2)
#else
#define ALL PROCS
#endif

active proctype Watchdog() {
#ifdef NEXT
  /* everyone finished, or only the worker waits, for a match that is not there */
  timeout -> assert(done == ALL || (done == ALL - 1 && nextWaiting))
#else
  timeout -> assert(done == ALL)
#endif
}

init {
  holder[0] = NONE; holder[1] = NONE; resv[0] = NONE; resv[1] = NONE;
  atomic {
    run Group(10, 0);
    run Group(11, 1);
#ifdef USER
    run User(12);
#endif
#ifdef SINGLE
    run Single(13);
#endif
#ifdef NEXT
    match[0] = 1; match[1] = 0;
    run Next(14);
    run Job();
#endif
  }
}
