/* handles.c - the registry of live communicators. Every public call looks its handle up here before
 * it reads anything behind it, so a destroyed, never-initialised or garbage handle is an error and
 * never a dereference. The registry also enforces the thread rule (one thread at a time inside a
 * communicator, docs/errors.md) and lets destroy and abort free nothing while a call is inside.
 *
 * A destroyed communicator's memory (the struct only; its resources are freed) stays allocated in
 * a quarantine of the last COMM_GRAVES destroyed ones, so that its address cannot come back as a new
 * communicator soon: a stale handle is then reported as destroyed. Past that many destroys the
 * oldest is freed and a stale handle reads as "not a communicator" (or, should the allocator give
 * its address to a new communicator, as that one: the limit of plain pointers as handles). Queued
 * group calls also keep the communicator's serial number, which no reuse can repeat. */
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

static int live_index(const struct mscclppComm* c) {
  for (int i = 0; i < nlive; i++)
    if (live[i] == c) return i;
  return -1;
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
  /* The allocator may have given c an address in the quarantine only after freeing that shell,
   * which never happens while it is there; nothing to clear. */
  pthread_mutex_unlock(&reg_lock);
  return mscclppSuccess;
}

/* Unregisters c (reg_lock held, c live). */
static void live_remove(struct mscclppComm* c) {
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

/* Counts a call into c (reg_lock held, c live): exclusive calls also claim the thread rule. */
static mscclppResult_t enter_locked(struct mscclppComm* c, int exclusive, const char* fn) {
  if (c->aborting) return MPP_ERR(mscclppAborted, "%s: the communicator is being aborted", fn);
  if (exclusive) {
    if (c->owner_depth > 0 && !pthread_equal(c->owner, pthread_self()))
      return MPP_ERR(mscclppInvalidUsage, "%s: the communicator is in use by another thread (inside %s); one thread at "
                     "a time may call into a communicator (docs/errors.md)", fn, c->owner_fn);
    if (c->owner_depth++ == 0) {
      c->owner = pthread_self();
      c->owner_fn = fn;
    }
  }
  /* Read by mscclppCommAbort's drain without the lock: it must see every call counted in. */
  atomic_fetch_add(&c->busy, 1);
  return mscclppSuccess;
}

mscclppResult_t comm_hold(struct mscclppComm* comm, uint64_t serial, int exclusive, const char* fn, struct comm_hold* h) {
  h->comm = NULL;
  pthread_mutex_lock(&reg_lock);
  mscclppResult_t res;
  if (live_index(comm) < 0 || (serial != 0 && comm->serial != serial))
    res = live_index(comm) < 0 ? not_live(comm, fn)
                               : MPP_ERR(mscclppInvalidUsage, "%s: communicator %p was destroyed (mscclppCommDestroy or "
                                         "mscclppCommAbort); a communicator must not be used after that", fn, (void*)comm);
  else
    res = enter_locked(comm, exclusive, fn);
  pthread_mutex_unlock(&reg_lock);
  if (res == mscclppSuccess) h->comm = comm, h->exclusive = exclusive;
  return res;
}

void comm_release(struct comm_hold* h) {
  struct mscclppComm* c = h->comm;
  if (c == NULL) return;
  pthread_mutex_lock(&reg_lock);
  if (h->exclusive && --c->owner_depth == 0) c->owner_fn = NULL;
  atomic_fetch_sub(&c->busy, 1);
  pthread_mutex_unlock(&reg_lock);
  h->comm = NULL;
}

mscclppResult_t comm_handle_retire(struct mscclppComm* c, const char* fn) {
  pthread_mutex_lock(&reg_lock);
  mscclppResult_t res = mscclppSuccess;
  if (live_index(c) < 0)
    res = not_live(c, fn);
  else if (c->aborting)
    res = MPP_ERR(mscclppInvalidUsage, "%s: the communicator is being aborted by another call", fn);
  else if (atomic_load(&c->busy) > 0)
    res = MPP_ERR(mscclppInvalidUsage, "%s: the communicator is in use by another thread (inside %s); destroy it once "
                  "that call has returned, or use mscclppCommAbort (docs/errors.md)", fn,
                  c->owner_fn ? c->owner_fn : "a query");
  else
    live_remove(c);
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
    /* Set under the lock: a call counted in by enter_locked before this point is in the busy count
     * the abort then drains; any later call sees the flag and is refused. */
    atomic_store(&c->aborting, 1);
  }
  pthread_mutex_unlock(&reg_lock);
  return res;
}

int comm_handle_abort_end(struct mscclppComm* c) {
  pthread_mutex_lock(&reg_lock);
  /* New calls have been refused since the aborting flag was set (enter_locked), so a zero count
   * seen here stays zero. */
  int idle = atomic_load(&c->busy) == 0;
  if (idle) live_remove(c);
  c->abort_running = 0;
  pthread_mutex_unlock(&reg_lock);
  return idle;
}
