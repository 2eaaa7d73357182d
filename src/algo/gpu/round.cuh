/* round.cuh - the signal/wait round of the bulk and zero-copy kernels: block b of every rank pairs
 * with block b of each peer on its own memory channel (chans[b * nranks + q]). */
#ifndef MPP_ALGO_GPU_ROUND_CUH_
#define MPP_ALGO_GPU_ROUND_CUH_

#include <mscclpp/memory_channel.h>

#include "algo/gpu/gpu.h"

/* Thread q signals peer q and waits for its signal when `part` is true in that thread (q == rank
 * and q >= nranks never take part). The signal releases this block's writes and reads made before
 * the caller's __syncthreads to the peer's block; the wait acquires the peer block's before the
 * __syncthreads here. Nonzero in every thread when a wait failed (the rank's device-error record
 * says who timed out).
 * relaxed: neither releases nor acquires; the round then only tells each peer that this launch has
 * started, so the stream work before it on this rank (which wrote its input or last read its
 * output) has completed, its writes in this GPU's memory, where the peers' NVLink reads go. That
 * suffices for a zero-copy launch's opening round over the users' buffers: it wrote nothing a peer
 * reads before it (the staged and eager bodies write a stage or descriptors first and release
 * them). A release round costs about 1.5 us more at 64 blocks (4x H200, docs/measurements.md). */
__device__ __forceinline__ int gx_round(const gpu_dev& d, bool part, bool relaxed = false) {
  int rc = MSCCLPP_DEVICE_OK;
  const mscclppMemoryChannel* ch = d.chans + (uint64_t)blockIdx.x * (uint64_t)d.nranks;
  int q = (int)threadIdx.x;
  if (part && q < d.nranks && q != d.rank) {
    if (relaxed) mscclppMemoryChannelRelaxedSignal(&ch[q]);
    else mscclppMemoryChannelSignal(&ch[q]);
    rc = relaxed ? mscclppMemoryChannelRelaxedWait(&ch[q]) : mscclppMemoryChannelWait(&ch[q]);
  }
  return __syncthreads_or(rc != MSCCLPP_DEVICE_OK);
}

#endif /* MPP_ALGO_GPU_ROUND_CUH_ */
