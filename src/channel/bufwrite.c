/* bufwrite.c - the seed API's mscclppRegisteredBufferWrite: copies into every peer's buffer of a
 * mscclppRegisterBuffer registration that is mapped here. */
#include <mscclpp/devconn.h>

#include <string.h>

#include "core/comm.h"
#include "sys/cudawrap.h"
#include "util/err.h"

/* One peer's copy: cudaMemcpyAsync on the stream for GPU ranks, memcpy for CPU ranks. */
static mscclppResult_t copy_one(struct mscclppComm* comm, void* dst, const void* src, size_t size, int64_t stream) {
  if (comm->kind != mscclppRankGpu) {
    memcpy(dst, src, size);
    return mscclppSuccess;
  }
#if MSCCLPP_HAVE_CUDA
  CUDA_CHECK(cudaMemcpyAsync(dst, src, size, cudaMemcpyDefault, (cudaStream_t)(intptr_t)stream));
  return mscclppSuccess;
#else
  (void)stream;
  return MPP_ERR(mscclppInvalidUsage, "mscclppRegisteredBufferWrite: a GPU rank in a build without CUDA");
#endif
}

mscclppResult_t mscclppRegisteredBufferWrite(mscclppComm_t comm, mscclppRegisteredMemory* regMem, void* srcBuff,
                                             size_t size, uint64_t srcOffset, uint64_t dstOffset, int64_t stream) {
  err_clear();
  COMM_CHECK(comm);
  MPP_CHECK_ARG(regMem != NULL && regMem->remote != NULL && regMem->nranks == comm->nranks,
                "mscclppRegisteredBufferWrite: regMem is not a registration of this communicator");
  MPP_CHECK_ARG(srcBuff != NULL, "mscclppRegisteredBufferWrite: srcBuff is NULL");
  if (size == 0) return mscclppSuccess;
  /* Check every peer first, so that a bad argument copies nothing. */
  for (int r = 0; r < regMem->nranks; r++) {
    if (r == comm->rank || regMem->remote[r] == NULL) continue;
    void* ptr = NULL;
    size_t cap = 0;
    MPP_CHECK(mscclppRegMemInfo(regMem->remote[r], &ptr, &cap, NULL));
    if (ptr == NULL)
      return MPP_ERR(mscclppInvalidUsage, "mscclppRegisteredBufferWrite: rank %d's buffer is not mapped here (tcp)", r);
    if (dstOffset > cap || size > cap - dstOffset)
      return MPP_ERR(mscclppInvalidArgument, "mscclppRegisteredBufferWrite: %zu bytes at offset %llu exceed rank %d's %zu",
                     size, (unsigned long long)dstOffset, r, cap);
  }
  for (int r = 0; r < regMem->nranks; r++) {
    if (r == comm->rank || regMem->remote[r] == NULL) continue;
    void* ptr = NULL;
    MPP_CHECK(mscclppRegMemInfo(regMem->remote[r], &ptr, NULL, NULL));
    MPP_CHECK(copy_one(comm, (char*)ptr + dstOffset, (const char*)srcBuff + srcOffset, size, stream));
  }
  return mscclppSuccess;
}
