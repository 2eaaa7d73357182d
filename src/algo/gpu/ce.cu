/* ce.cu - the kernels of the copy-engine collectives (ce.c): the signal/wait round that opens and
 * closes a call, and the local reduction of the parts the copy engines pulled. */
#include <cuda_runtime.h>

#include "algo/gpu/gpu.h"
#include "elem/reduce.cuh"
#include "algo/gpu/round.cuh"

#define CE_RED_THREADS 512
#define CE_RED_MAX_BLOCKS 264 /* two per SM of an H100/H200 */

/* One block, a thread per peer, on block 0's channels. Stream order puts the copies after the
 * opening round and the closing round after the copies, so a peer passing its closing round knows
 * this rank's copies into and out of its buffers have completed. A failed wait is in the rank's
 * device-error record. */
__global__ void ce_round_kernel(gpu_dev d) { (void)gx_round(d, true); }

struct ce_srcs {
  const char* p[GPU_MAX_RANKS];
};

template <int DT, int OP>
__global__ void __launch_bounds__(CE_RED_THREADS) ce_reduce_kernel(char* dst, ce_srcs s, int n, uint64_t count) {
  red_range<DT, OP, true>(dst, s.p, n, count, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}

typedef void (*ce_fn)(char*, ce_srcs, int, uint64_t);
template <int DT, int OP>
struct CeGet {
  typedef ce_fn fn;
  static fn get() { return ce_reduce_kernel<DT, OP>; }
};

extern "C" mscclppResult_t gpu_launch_ce_round(const struct gpu_dev* d, void* stream) {
  ce_round_kernel<<<1, 32, 0, (cudaStream_t)stream>>>(*d);
  return gpu_cuda_check(cudaGetLastError(), "copy-engine round launch");
}

extern "C" mscclppResult_t gpu_launch_ce_reduce(int dtype, int op, char* dst, const char* const* srcs, int n,
                                                uint64_t bytes, void* stream) {
  ce_srcs s;
  for (int r = 0; r < n; r++) s.p[r] = srcs[r];
  uint64_t units = bytes / 16 + 1, blocks = (units + 2 * CE_RED_THREADS - 1) / (2 * CE_RED_THREADS);
  if (blocks > CE_RED_MAX_BLOCKS) blocks = CE_RED_MAX_BLOCKS;
  uint64_t count = bytes / (uint64_t)elem_dtype_size(dtype);
  GxPick<CeGet>::pick(dtype, op)<<<(unsigned)blocks, CE_RED_THREADS, 0, (cudaStream_t)stream>>>(dst, s, n, count);
  return gpu_cuda_check(cudaGetLastError(), "copy-engine reduction launch");
}

extern "C" mscclppResult_t gpu_preload_ce(void) {
  cudaFuncAttributes attr;
  cudaError_t e = cudaFuncGetAttributes(&attr, (const void*)ce_round_kernel);
  if (e == cudaSuccess) e = GxPick<CeGet>::preload();
  return gpu_cuda_check(e, "loading the copy-engine kernels");
}
