/* supports.c - whether the executor runs plans on a communicator's rank kind. */
#include "exec/supports.h"

#include "core/comm.h"

#if MSCCLPP_HAVE_CUDA
#define EXEC_GPU_RANKS 1
#else
#define EXEC_GPU_RANKS 0
#endif

int exec_supports_kind(const struct mscclppComm* comm) {
  return comm->kind == mscclppRankCpu || (comm->kind == mscclppRankGpu && EXEC_GPU_RANKS);
}
