/* handles.c - the registry of live communicators. Every public call looks its handle up here before
 * it reads anything behind it, so a destroyed, never-initialised or garbage handle is an error and
 * never a dereference. The registry also enforces the thread rule (one thread at a time inside a
 * communicator, docs/errors.md) and lets destroy and abort free nothing while a call is inside.
 *
 * The hot path takes no lock. A live communicator is published in a small direct-mapped table of
 * atomic pointers (its slot chosen by its address); a call whose handle sits in its slot counts
 * itself in (busy) and looks again: destroy empties the slot before it reads busy, so either the
 * call sees the slot empty and backs out, or destroy sees the call and refuses. Handles that share
 * a slot with another live communicator, and every error, take the locked path, which is the
 * authority (the table only ever holds live communicators, so it can miss but never lie).
 *
 * A destroyed communicator's memory (the struct only; its resources are freed) stays allocated in
 * a quarantine of the last COMM_GRAVES destroyed ones, so that its address cannot come back as a new
 * communicator soon: a stale handle is then reported as destroyed, and a call that read the slot
 * just before the destroy touches only quarantined memory. Past that many destroys the oldest is
 * freed and a stale handle reads as "not a communicator" (or, should the allocator give its address
 * to a new communicator, as that one: the limit of plain pointers as handles). Queued group calls
 * also keep the communicator's serial number, which no reuse can repeat. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/comm_internal.h"
#include "util/err.h"

#define COMM_GRAVES 64

/* All fields under reg_lock. live: dynamic array of registered communicators (a linear scan: a
 * process has few communicators). */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mscclppComm** live;
static int nlive, live_cap;
static struct mscclppComm* graves[COMM_GRAVES];
static int grave_next;
static uint64_t next_serial = 1;

#define FAST_SLOTS 256 /* power of two */

/* Live communicators by address hash; written under reg_lock, read without it. */
static _Atomic(struct mscclppComm*) fast[FAST_SLOTS];

/* A thread's token for the owner field: the address of a thread-local byte, distinct per thread. */
static _Thread_local char thread_token;

static _Atomic(struct mscclppComm*)* fast_slot(const void* p) {
  uint64_t h = ((uint64_t)(uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull;
  return &fast[h >> (64 - 8)];
}

static int live_index(const struct mscclppComm* c) {
  for (int i = 0; i < nlive; i++)
    if (live[i] == c) return i;
  return -1;
}

/* Puts c (live, reg_lock held) in its fast slot when the slot is free. The seq_cst store also
 * publishes c's initialised fields to the lock-free readers, which load the slot first. */
static void fast_publish(struct mscclppComm* c) {
  _Atomic(struct mscclppComm*)* s = fast_slot(c);
  if (atomic_load(s) == NULL) atomic_store(s, c);
}

/* Takes c out of its fast slot (reg_lock held), giving the slot to another live communicator of
 * the same slot if there is one. */
static void fast_unpublish(struct mscclppComm* c) {
  _Atomic(struct mscclppComm*)* s = fast_slot(c);
  if (atomic_load(s) != c) return;
  atomic_store(s, NULL);
  for (int i = 0; i < nlive; i++)
    if (live[i] != c && fast_slot(live[i]) == s && !atomic_load(&live[i]->aborting)) {
      atomic_store(s, live[i]);
      break;
    }
}
static int in_graves(const void* p) {
  for (int i = 0; i < COMM_GRAVES; i++)
    if (graves[i] == p) return 1;
  return 0;
}

/* The error for a handle that is not live (reg_lock held: reads the quarantine). */
static mscclppResult_t not_live(const void* p, const char* fn) {
  if (in_graves(p))
    return MPP_ERR(mscclppInvalidUsage, "%s: communicator %p was destroyed (mscclppCommDestroy or mscclppCommAbort); "
                   "a communicator must not be used after that", fn, p);
  return MPP_ERR(mscclppInvalidUsage, "%s: %p is not a communicator (never made by an mscclppCommInit call, or "
                 "destroyed long ago)", fn, p);
}

mscclppResult_t comm_handle_add(struct mscclppComm* c) {
  pthread_mutex_lock(&reg_lock);
  if (nlive == live_cap) {
    int ncap = live_cap ? live_cap * 2 : 16;
    struct mscclppComm** p = realloc(live, (size_t)ncap * sizeof(*p));
    if (p == NULL) {
      pthread_mutex_unlock(&reg_lock);
      return MPP_ERR(mscclppSystemError, "out of memory for the registry of communicators");
    }
    live = p, live_cap = ncap;
  }
  live[nlive++] = c;
  c->serial = next_serial++;
  fast_publish(c);
  /* The allocator may have given c an address in the quarantine only after freeing that shell,
   * which never happens while it is there; nothing to clear. */
  pthread_mutex_unlock(&reg_lock);
  return mscclppSuccess;
}

/* Unregisters c (reg_lock held, c live). */
static void live_remove(struct mscclppComm* c) {
  fast_unpublish(c);
  int i = live_index(c);
  live[i] = live[--nlive];
}

void comm_handle_bury(struct mscclppComm* c) {
  memset(c, 0, sizeof(*c));
  pthread_mutex_lock(&reg_lock);
  struct mscclppComm* old = graves[grave_next];
  graves[grave_next] = c;
  grave_next = (grave_next + 1) % COMM_GRAVES;
  pthread_mutex_unlock(&reg_lock);
  free(old);
}

/* Claims the thread rule for an exclusive call of this thread into c (counted in already). Only the
 * owner thread touches owner_depth; the CAS makes one thread the owner. */
static mscclppResult_t claim_owner(struct mscclppComm* c, const char* fn) {
  uintptr_t me = (uintptr_t)&thread_token, none = 0;
  if (atomic_load_explicit(&c->owner, memory_order_relaxed) == me) { /* a nested call of the owner */
    c->owner_depth++;
    return mscclppSuccess;
  }
  /* acquire: the new owner sees what the previous owner wrote before its release (comm_release) */
  if (!atomic_compare_exchange_strong_explicit(&c->owner, &none, me, memory_order_acquire, memory_order_relaxed)) {
    const char* inside = atomic_load(&c->owner_fn);
    return MPP_ERR(mscclppInvalidUsage, "%s: the communicator is in use by another thread (inside %s); one thread at a "
                   "time may call into a communicator (docs/errors.md)", fn, inside ? inside : "a call");
  }
  c->owner_depth = 1;
  atomic_store(&c->owner_fn, fn);
  return mscclppSuccess;
}

/* The lock-free look-up: counts a call into comm and returns 1 when comm is live in its fast slot,
 * not aborting and (serial != 0) of that serial; else 0 and nothing counted. */
static int fast_enter(struct mscclppComm* comm, uint64_t serial) {
  _Atomic(struct mscclppComm*)* s = fast_slot(comm);
  if (atomic_load(s) != comm) return 0;
  /* seq_cst, the pair of comm_handle_retire's (empty the slot, then read busy) and of abort's
   * (set aborting, then drain busy): after counting in we look again, so one side sees the other. */
  atomic_fetch_add(&comm->busy, 1);
  if (atomic_load(s) == comm && !atomic_load(&comm->aborting) && (serial == 0 || comm->serial == serial)) return 1;
  atomic_fetch_sub(&comm->busy, 1);
  return 0;
}

/* The locked look-up, the authority: counts a call into comm or returns the error that says why
 * not (not a communicator, destroyed, another serial, aborting). */
static mscclppResult_t locked_enter(struct mscclppComm* comm, uint64_t serial, const char* fn) {
  pthread_mutex_lock(&reg_lock);
  mscclppResult_t res = mscclppSuccess;
  if (live_index(comm) < 0)
    res = not_live(comm, fn);
  else if (serial != 0 && comm->serial != serial)
    res = MPP_ERR(mscclppInvalidUsage, "%s: communicator %p was destroyed (mscclppCommDestroy or mscclppCommAbort); a "
                  "communicator must not be used after that", fn, (void*)comm);
  else if (atomic_load(&comm->aborting))
    res = MPP_ERR(mscclppAborted, "%s: the communicator is being aborted", fn);
  else
    atomic_fetch_add(&comm->busy, 1); /* under the lock: retire and abort_begin cannot run meanwhile */
  pthread_mutex_unlock(&reg_lock);
  return res;
}

mscclppResult_t comm_hold(struct mscclppComm* comm, uint64_t serial, int exclusive, const char* fn, struct comm_hold* h) {
  h->comm = NULL;
  if (!fast_enter(comm, serial)) MPP_CHECK(locked_enter(comm, serial, fn));
  if (exclusive) {
    mscclppResult_t res = claim_owner(comm, fn);
    if (res != mscclppSuccess) {
      atomic_fetch_sub(&comm->busy, 1);
      return res;
    }
  }
  h->comm = comm, h->exclusive = exclusive;
  return mscclppSuccess;
}

void comm_release(struct comm_hold* h) {
  struct mscclppComm* c = h->comm;
  if (c == NULL) return;
  if (h->exclusive && --c->owner_depth == 0) {
    atomic_store(&c->owner_fn, NULL);
    atomic_store_explicit(&c->owner, 0, memory_order_release); /* the next owner's CAS acquires our writes */
  }
  /* seq_cst (a release at least): destroy or abort that reads busy 0 sees everything this call did. */
  atomic_fetch_sub(&c->busy, 1);
  h->comm = NULL;
}

mscclppResult_t comm_handle_retire(struct mscclppComm* c, const char* fn) {
  pthread_mutex_lock(&reg_lock);
  mscclppResult_t res = mscclppSuccess;
  if (live_index(c) < 0)
    res = not_live(c, fn);
  else if (c->aborting)
    res = MPP_ERR(mscclppInvalidUsage, "%s: the communicator is being aborted by another call", fn);
  else {
    fast_unpublish(c); /* first: a lock-free call that counts itself in after this falls back to the lock */
    if (atomic_load(&c->busy) > 0) {
      const char* inside = atomic_load(&c->owner_fn);
      res = MPP_ERR(mscclppInvalidUsage, "%s: the communicator is in use by another thread (inside %s); destroy it "
                    "once that call has returned, or use mscclppCommAbort (docs/errors.md)", fn,
                    inside ? inside : "a query");
      fast_publish(c);
    } else {
      live_remove(c);
    }
  }
  pthread_mutex_unlock(&reg_lock);
  return res;
}

mscclppResult_t comm_handle_abort_begin(struct mscclppComm* c, const char* fn) {
  pthread_mutex_lock(&reg_lock);
  mscclppResult_t res = mscclppSuccess;
  if (live_index(c) < 0)
    res = not_live(c, fn);
  else if (c->abort_running)
    res = MPP_ERR(mscclppInvalidUsage, "%s: another mscclppCommAbort of this communicator is running", fn);
  else {
    c->abort_running = 1;
    /* seq_cst, the pair of fast_enter's (count in, then read aborting): a call counted in before
     * this is in the busy count the abort then drains; any later call sees the flag and backs out. */
    atomic_store(&c->aborting, 1);
  }
  pthread_mutex_unlock(&reg_lock);
  return res;
}

int comm_handle_abort_end(struct mscclppComm* c, int object_calls) {
  pthread_mutex_lock(&reg_lock);
  /* New calls have been refused since the aborting flag was set (fast_enter backs out, locked_enter
   * refuses), so a zero count seen here stays zero. */
  int idle = atomic_load(&c->busy) == 0 && object_calls == 0;
  if (idle) live_remove(c);
  c->abort_running = 0;
  pthread_mutex_unlock(&reg_lock);
  return idle;
}
