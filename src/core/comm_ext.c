/* comm_ext.c - per-communicator state slots of the upper layers (see comm.h). */
#include <stdatomic.h>

#include "core/comm.h"
#include "core/comm_internal.h"
#include "util/err.h"

mscclppResult_t comm_ext_get(struct mscclppComm* comm, enum comm_ext_slot slot, comm_ext_make_fn make,
                             comm_ext_fini_fn fini, void** state) {
  /* Acquire: a state seen here was fully made before the release store below published it. */
  void* s = atomic_load_explicit(&comm->ext[slot].state, memory_order_acquire);
  if (s) {
    *state = s;
    return mscclppSuccess;
  }
  mscclppResult_t res = mscclppSuccess;
  pthread_mutex_lock(&comm->ext_lock);
  s = atomic_load_explicit(&comm->ext[slot].state, memory_order_relaxed);
  if (!s) {
    res = make(comm, &s);
    if (res == mscclppSuccess) {
      comm->ext[slot].fini = fini;
      atomic_store_explicit(&comm->ext[slot].state, s, memory_order_release);
    }
  }
  pthread_mutex_unlock(&comm->ext_lock);
  *state = s;
  return res;
}

void* comm_ext_peek(struct mscclppComm* comm, enum comm_ext_slot slot) {
  return atomic_load_explicit(&comm->ext[slot].state, memory_order_acquire);
}

void comm_ext_release(struct mscclppComm* comm, enum comm_ext_slot slot, int abort) {
  pthread_mutex_lock(&comm->ext_lock);
  void* s = atomic_exchange(&comm->ext[slot].state, NULL);
  comm_ext_fini_fn fini = comm->ext[slot].fini;
  pthread_mutex_unlock(&comm->ext_lock);
  if (s && fini) fini(comm, s, abort);
}

void comm_ext_fini_all(struct mscclppComm* comm, int abort) {
  for (int slot = COMM_EXT_COUNT - 1; slot >= 0; slot--) comm_ext_release(comm, (enum comm_ext_slot)slot, abort);
}
