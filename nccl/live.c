/* live.c - the table of live communicators: every call checks its handle here before touching it,
 * so a destroyed, aborted or made-up handle is InvalidArgument, never a read of freed memory.
 * The table is searched under a lock; a thread remembers the last handle it found live, and that
 * answer holds until any communicator is removed (a generation count), so the calls of a steady
 * loop on one communicator take no lock. */
#include <stdlib.h>

#include "shim.h"

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static ncclComm_t* live;
static size_t nlive, caplive;
static _Atomic unsigned long removals; /* communicators removed so far */
static _Thread_local ncclComm_t last_live;
static _Thread_local unsigned long last_removals;

int shim_live_add(ncclComm_t comm) {
  pthread_mutex_lock(&live_lock);
  int ok = 1;
  if (nlive == caplive) {
    size_t n = caplive ? caplive * 2 : 16;
    ncclComm_t* q = realloc(live, n * sizeof(*q));
    if (q) live = q, caplive = n;
    else ok = 0;
  }
  if (ok) live[nlive++] = comm;
  pthread_mutex_unlock(&live_lock);
  return ok;
}

void shim_live_remove(ncclComm_t comm) {
  pthread_mutex_lock(&live_lock);
  /* before the handle leaves the table: a thread that read the old count may still take its
   * remembered answer, but only for a call that raced with this destroy (which NCCL forbids) */
  atomic_fetch_add(&removals, 1);
  for (size_t i = 0; i < nlive; i++)
    if (live[i] == comm) {
      live[i] = live[--nlive];
      break;
    }
  pthread_mutex_unlock(&live_lock);
}

int shim_live(ncclComm_t comm) {
  unsigned long gen = atomic_load(&removals);
  if (comm != NULL && comm == last_live && gen == last_removals) return 1;
  pthread_mutex_lock(&live_lock);
  int found = 0;
  for (size_t i = 0; i < nlive && !found; i++) found = live[i] == comm;
  pthread_mutex_unlock(&live_lock);
  if (found) last_live = comm, last_removals = gen;
  return found;
}

/* The last twin this thread found, remembered like last_live: the real NCCL asks about its own
 * communicator at every call forwarded to it, and those calls take no lock once it is known. */
static _Thread_local const void* last_twin;
static _Thread_local unsigned long last_twin_removals;

int shim_live_is_twin(const void* real) {
  unsigned long gen = atomic_load(&removals);
  if (real == NULL) return 0;
  if (real == last_twin && gen == last_twin_removals) return 1;
  pthread_mutex_lock(&live_lock);
  int found = 0;
  for (size_t i = 0; i < nlive && !found; i++) found = live[i]->real == real;
  pthread_mutex_unlock(&live_lock);
  if (found) last_twin = real, last_twin_removals = gen;
  return found;
}
