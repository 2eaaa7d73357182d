/* supports.c - whether the executor runs plans on a communicator's rank kind. */
#include "exec/supports.h"

#include "core/comm.h"
#include "transport/transport.h"

#if MSCCLPP_HAVE_CUDA
#define EXEC_GPU_RANKS 1
#else
#define EXEC_GPU_RANKS 0
#endif

/* GPU ranks: the GPU executor reaches its peers through cuda-ipc only, so every rank must share
 * this rank's host. */
static int one_host(const struct mscclppComm* comm) {
  for (int r = 0; r < comm->nranks; r++)
    if (!transport_same_host(&comm->tc, r)) return 0;
  return 1;
}

int exec_supports_kind(const struct mscclppComm* comm) {
  return comm->kind == mscclppRankCpu || (comm->kind == mscclppRankGpu && EXEC_GPU_RANKS && one_host(comm));
}
