/* live.c - the table of live communicators: every call checks its handle here before touching it,
 * so a destroyed, aborted or made-up handle is InvalidArgument, never a read of freed memory. */
#include <stdlib.h>

#include "shim.h"

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static ncclComm_t* live;
static size_t nlive, caplive;

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
  for (size_t i = 0; i < nlive; i++)
    if (live[i] == comm) {
      live[i] = live[--nlive];
      break;
    }
  pthread_mutex_unlock(&live_lock);
}

int shim_live(ncclComm_t comm) {
  pthread_mutex_lock(&live_lock);
  int found = 0;
  for (size_t i = 0; i < nlive && !found; i++) found = live[i] == comm;
  pthread_mutex_unlock(&live_lock);
  return found;
}
