/* state.c - the per-communicator state of the collectives, kept in the communicator's
 * COMM_EXT_ALGO slot: made on first use, released at communicator teardown. */
#include <stdlib.h>

#include "algo/algo.h"
#include "algo/cpu/hier.h"
#include "algo/cpu/net.h"
#include "algo/gpu/gpu.h"
#include "algo/gpu/xhost.h"
#include "core/comm.h"
#include "util/err.h"

/* Releases the state: scratch, connections and semaphores (abort: without waiting for peers). */
static void state_fini(struct mscclppComm* comm, void* state, int abort) {
  (void)comm;
  struct algo_comm* ac = state;
  xh_free(ac->xh, abort); /* first: its queued host steps use the CPU pipes */
  cpu_net_free(ac->net);
  cpu_hier_free(ac->hier);
  algo_win_free_all(ac);
  gpu_net_free(ac->gnet);
  free(ac->premul);
  free(ac);
}

static mscclppResult_t state_make(struct mscclppComm* comm, void** state) {
  struct algo_comm* ac = calloc(1, sizeof(*ac));
  if (ac == NULL) return MPP_ERR(mscclppSystemError, "collectives: out of host memory for the communicator's state");
  ac->comm = comm;
  ac->rank = comm->rank;
  ac->nranks = comm->nranks;
  ac->kind = comm->kind;
  ac->nhosts = cpu_hier_count_hosts(ac);
  if (ac->nhosts < 0) {
    free(ac);
    return MPP_ERR(mscclppSystemError, "collectives: out of host memory for the host layout");
  }
  for (int r = 0; r < comm->nranks; r++)
    if (comm->peers[r].kind != comm->kind) ac->kind = -1 - r; /* mixed: remembers a rank of the other kind */
  *state = ac;
  return mscclppSuccess;
}

mscclppResult_t algo_comm_get(struct mscclppComm* comm, struct algo_comm** out) {
  void* state = NULL;
  MPP_CHECK(comm_ext_get(comm, COMM_EXT_ALGO, state_make, state_fini, &state));
  *out = state;
  return mscclppSuccess;
}
