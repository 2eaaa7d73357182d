/* bulk.cu - the bandwidth exchange kernel of the GPU collectives: a gx_plan moved in steps through
 * the bulk inboxes with SM stores over NVLink and one semaphore round per step.
 *
 * Block b of nblocks owns bytes [b * S, (b + 1) * S) of every inbox (S = bulk_slot / nblocks) and,
 * in step k, bytes [k * C + b * cb, +cb) of every part (C = nblocks * cb; cb <= S is the launch's
 * step, smaller for mid-size messages so that they still pipeline: step_bytes). The block puts step
 * 0, then for every step k: a round (signal every peer on the block's own channel and wait for
 * every peer's signal, so each block pairs only with the same block of the peers; the signal of
 * round k says "my put of step k and my read of step k - 1 are done"), then the put of step k + 1
 * into the peers' inboxes of parity (k + 1) mod 2, then the copy or reduction of step k out of its
 * own inbox of parity k mod 2. Issuing the next put before reading lets the NVLink stores drain
 * while the block reads.
 *
 * Reuse: a block writes a peer's inbox of parity p again (step k + 1) right after round k, whose
 * signal from the peer certifies that the peer finished reading step k - 1 (same parity). A launch
 * ends with one more round after the last read, so the next launch, whatever its size, starts on
 * drained inboxes. A step reads a range of the input before it writes the same
 * range of the output, in the same block, so in-place calls are safe. Every rank runs the same
 * number of steps (from p.maxlen, equal on every rank) and signals every peer in every step. */
#include <cuda_runtime.h>

#include <mscclpp/copy.h>
#include <mscclpp/memory_channel.h>

#include "algo/gpu/gpu.h"
#include "elem/reduce.cuh"
#include "algo/gpu/round.cuh"

__device__ __forceinline__ uint64_t share(uint64_t len, uint64_t lo, uint64_t cb) {
  return len > lo ? (len - lo < cb ? len - lo : cb) : 0;
}

/* Inbox (parity, from) of this block in the scratch at base. */
__device__ __forceinline__ char* bulk_inbox(const gpu_dev& d, char* base, uint32_t parity, int from) {
  uint64_t cb = d.bulk_slot / (uint64_t)d.nblocks;
  return base + d.ll_bytes + ((uint64_t)parity * (uint64_t)d.nranks + (uint64_t)from) * d.bulk_slot +
         (uint64_t)blockIdx.x * cb;
}

/* Steps peer q takes part in: all of them for a collective, its pair's own for p2p. */
__device__ __forceinline__ uint64_t peer_steps(const gx_plan& p, int q, uint64_t C, uint64_t all) {
  return p.p2p ? (p.pair_len[q] + C - 1) / C : all;
}

/* The round of step k with every peer that takes part in it (k == steps: the closing round, with
 * every peer that took part at all); nonzero in every thread when a wait failed. */
__device__ int bulk_round(const gpu_dev& d, const gx_plan& p, uint64_t k, uint64_t C, uint64_t steps) {
  int q = (int)threadIdx.x;
  uint64_t mine = q < d.nranks ? peer_steps(p, q, C, steps) : 0;
  return gx_round(d, k < mine || (k == steps && mine > 0));
}

/* SCALES: the kernel may scale (premultiplied sums); the copy kernel passes false. */
template <int DT, bool SCALES>
__device__ void bulk_put(const gpu_dev& d, const gx_plan& p, uint64_t k, uint64_t lo, uint64_t cb) {
  elem_scalar sc = SCALES && p.scale_send ? plan_scalar<DT>(p.scalar, p.scalar_dev) : p.scalar;
  for (int i = 1; i < d.nranks; i++) { /* from the next rank on: the ranks' writes spread over the peers */
    int q = (d.rank + i) % d.nranks;
    uint64_t n = share(p.send_len[q], lo, cb);
    if (q == d.rank || n == 0) continue;
    char* dst = bulk_inbox(d, (char*)d.chans[q].remote, (uint32_t)(k & 1), d.rank);
    const char* src = p.src + p.send_off[q] + lo;
    if (SCALES && p.scale_send) scale_range<DT>(dst, src, n / sizeof(typename Ty<DT>::T), sc, threadIdx.x, blockDim.x);
    else mscclppCopy(dst, src, n, threadIdx.x, blockDim.x);
  }
}

__device__ void bulk_copy_out(const gpu_dev& d, const gx_plan& p, uint64_t k, uint64_t lo, uint64_t cb) {
  for (int q = 0; q < d.nranks; q++) {
    uint64_t n = share(p.recv_len[q], lo, cb);
    if (n == 0) continue;
    char* dst = p.dst + p.recv_off[q] + lo;
    const char* src = q == d.rank ? p.src + p.send_off[q] + lo : bulk_inbox(d, d.scratch, (uint32_t)(k & 1), q);
    if (src != dst) mscclppCopy(dst, src, n, threadIdx.x, blockDim.x);
  }
}

template <int DT, int OP>
__device__ void bulk_reduce_out(const gpu_dev& d, const gx_plan& p, uint64_t k, uint64_t lo, uint64_t cb) {
  typedef typename Ty<DT>::T T;
  uint64_t n = share(p.recv_len[d.rank], lo, cb);
  if (n == 0) return;
  const char* srcs[GPU_MAX_RANKS];
  const char* own = p.src + p.send_off[d.rank] + lo;
  char* dst = p.dst + p.red_off + lo;
  if (p.scale_send) { /* the own part scaled like the peers' (into dst: read and written by one thread) */
    scale_range<DT>(dst, own, n / sizeof(T), plan_scalar<DT>(p.scalar, p.scalar_dev), threadIdx.x, blockDim.x);
    __syncthreads();
    own = dst;
  }
  for (int r = 0; r < d.nranks; r++) srcs[r] = r == d.rank ? own : bulk_inbox(d, d.scratch, (uint32_t)(k & 1), r);
  red_range<DT, OP, true>(dst, srcs, d.nranks, n / sizeof(T), threadIdx.x, blockDim.x);
}

/* The whole exchange of one block. REDUCES: the kernel also serves GX_REDUCE and scaled plans;
 * without it, only unscaled copies (the launch picks accordingly). */
template <int DT, int OP, bool REDUCES>
__device__ __forceinline__ void bulk_run(const gpu_dev& d, const gx_plan& p) {
  if (p.skip != NULL && *p.skip != 0) return; /* the probe before it did the call (every rank alike) */
  uint64_t cb = p.step_cb, C = cb * (uint64_t)d.nblocks;
  uint64_t steps = (p.maxlen + C - 1) / C, mine = (uint64_t)blockIdx.x * cb;
  if (steps > 0) bulk_put<DT, REDUCES>(d, p, 0, mine, cb);
  __syncthreads();
  for (uint64_t k = 0; k < steps; k++) {
    uint64_t lo = k * C + mine;
    if (bulk_round(d, p, k, C, steps)) return; /* the rank's device-error record says who timed out */
    if (k + 1 < steps) bulk_put<DT, REDUCES>(d, p, k + 1, lo + C, cb);
    if (p.mode == GX_COPY) bulk_copy_out(d, p, k, lo, cb);
    else if (REDUCES && p.mode == GX_REDUCE) bulk_reduce_out<DT, OP>(d, p, k, lo, cb);
    __syncthreads();
  }
  (void)bulk_round(d, p, steps, C, steps);
}

/* Reducing or scaling plans. Uncapped: 128 registers, one 512-thread block per SM, so the default
 * 256 blocks run in two waves on 132 SMs. Capped at two blocks per SM (64 registers) it spills
 * 180-470 B per thread and was slower (2x H200, eager allreduce: 228 vs 215 us at 64 MiB, 803 vs
 * 773 us at 256 MiB, the same run). */
template <int DT, int OP>
__global__ void __launch_bounds__(GPU_BULK_THREADS) bulk_kernel(gpu_dev d, gx_plan p) {
  bulk_run<DT, OP, true>(d, p);
}

/* Unscaled copies (allgather, alltoall, broadcast, send / receive): no reduction code, 64 registers
 * without spills, two blocks per SM, the 256 blocks in one wave (2x H200, eager, us, this kernel /
 * the uncapped one: allgather 115.0 / 129.0 at 64 MiB, 392.7 / 403.7 at 256 MiB; alltoall 115.2 /
 * 127.6, 393.2 / 404.9; the same run). */
__global__ void __launch_bounds__(GPU_BULK_THREADS, 2) bulk_copy_kernel(gpu_dev d, gx_plan p) {
  bulk_run<0, ELEM_OP_SUM, false>(d, p);
}

typedef void (*bulk_fn)(gpu_dev, gx_plan);
template <int DT, int OP>
struct BulkGet {
  typedef bulk_fn fn;
  static fn get() { return bulk_kernel<DT, OP>; }
};

/* Bytes per block and step for parts of maxlen: the block's whole inbox share, or less so that
 * the message takes at least bulk_min_steps steps (a deeper pipeline for mid sizes), never under
 * 4 KiB; a multiple of 16. The same on every rank (maxlen and the geometry are). */
static uint64_t step_bytes(const struct gpu_dev* d, uint64_t maxlen) {
  uint64_t full = d->bulk_slot / (uint64_t)d->nblocks;
  uint64_t want = maxlen / ((uint64_t)d->nblocks * (uint64_t)d->bulk_min_steps);
  want = (want + 15) / 16 * 16;
  if (want < 4096) want = 4096;
  return want < full ? want : full;
}

extern "C" mscclppResult_t gpu_launch_bulk(const struct gpu_dev* d, const struct gx_plan* p, void* stream) {
  bool copies = p->mode != GX_REDUCE && !p->scale_send;
  bulk_fn k = copies ? bulk_copy_kernel : GxPick<BulkGet>::pick(p->dtype, p->op);
  struct gx_plan q = *p;
  q.step_cb = step_bytes(d, p->maxlen);
  k<<<d->nblocks, GPU_BULK_THREADS, 0, (cudaStream_t)stream>>>(*d, q);
  return gpu_cuda_check(cudaGetLastError(), "bulk kernel launch");
}

extern "C" mscclppResult_t gpu_preload_bulk(void) {
  cudaFuncAttributes attr;
  cudaError_t e = cudaFuncGetAttributes(&attr, (const void*)bulk_copy_kernel);
  return gpu_cuda_check(e == cudaSuccess ? GxPick<BulkGet>::preload() : e, "loading the bulk kernels");
}

extern "C" mscclppResult_t gpu_resident_bulk(int* per_sm) {
  const void* k = (const void*)bulk_copy_kernel;
  return gpu_cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, k, GPU_BULK_THREADS, 0),
                        "the bulk copy kernel's occupancy");
}
