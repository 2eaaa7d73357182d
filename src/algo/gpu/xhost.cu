/* xhost.cu - the GPU side of GPU ranks on several hosts (xhost.h): the reduction of what the hosts
 * sent, on the GPU instead of in a host step. dst[i] = srcs[0][i] op srcs[1][i] op ..., in source
 * order (the hosts' order, the same on every rank, so every rank gets the same bits), then divided
 * by `divide` when it is > 0 (avg across two levels). Sources may be device memory or host-mapped
 * pinned memory (the stage: the GPU reads it over PCIe, no copy in first); dst may be a source. */
#include <cuda_runtime.h>

#include "algo/gpu/gpu.h"
#include "elem/reduce.cuh"

#define XH_RED_THREADS 512
#define XH_RED_BLOCKS 132

struct xh_red {
  char* dst;
  const char* srcs[XH_MAX_SRCS];
  int nsrc, divide;
  uint64_t count;
};

template <int DT, int OP>
__global__ void __launch_bounds__(XH_RED_THREADS) xh_reduce_kernel(xh_red r) {
  typedef typename Ty<DT>::T T;
  typedef typename Ty<DT>::A A;
  uint64_t nt = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < r.count; i += nt) {
    A acc = Ty<DT>::in(((const T*)r.srcs[0])[i]);
    for (int s = 1; s < r.nsrc; s++) acc = gx_comb(acc, Ty<DT>::in(((const T*)r.srcs[s])[i]), (int)CombOp<OP>::v);
    ((T*)r.dst)[i] = r.divide > 0 ? Ty<DT>::div(acc, r.divide) : Ty<DT>::out(acc);
  }
}

typedef void (*xh_red_fn)(xh_red);
template <int DT, int OP>
struct XhGet {
  typedef xh_red_fn fn;
  static fn get() { return xh_reduce_kernel<DT, OP>; }
};

extern "C" mscclppResult_t xh_reduce_launch(void* dst, const void* const* srcs, int nsrc, size_t count, int dtype,
                                            int op, int divide, void* stream) {
  if (nsrc < 1 || nsrc > XH_MAX_SRCS) /* the callers keep to 1..XH_MAX_SRCS hosts */
    return gpu_cuda_check(cudaErrorInvalidValue, "the cross-host reduction's source count");
  if (count == 0) return mscclppSuccess;
  xh_red r = {};
  r.dst = (char*)dst, r.nsrc = nsrc, r.divide = divide, r.count = count;
  for (int s = 0; s < nsrc; s++) r.srcs[s] = (const char*)srcs[s];
  uint64_t blocks = (count + XH_RED_THREADS - 1) / XH_RED_THREADS;
  if (blocks > XH_RED_BLOCKS) blocks = XH_RED_BLOCKS;
  GxPick<XhGet>::pick(dtype, op)<<<(unsigned)blocks, XH_RED_THREADS, 0, (cudaStream_t)stream>>>(r);
  return gpu_cuda_check(cudaGetLastError(), "the cross-host reduction's launch");
}

extern "C" mscclppResult_t xh_preload(void) {
  return gpu_cuda_check(GxPick<XhGet>::preload(), "loading the cross-host reduction kernels");
}
