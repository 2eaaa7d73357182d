/* zc.cu - the zero-copy exchange kernel of the GPU collectives (gx_zc in gpu.h): for calls captured
 * into a CUDA graph, whose every rank's buffers are mapped on every rank (zc.c), the data moves
 * once, straight between the users' buffers over NVLink: puts into peers' outputs (allgather,
 * alltoall), reads of peers' inputs reduced into the own output (reducescatter), or both in one
 * pass (allreduce: each rank reduces its slice from every input and writes the result into every
 * output).
 *
 * Block b owns bytes [b * chunk, +chunk) of every part, on every rank, and pairs with block b of
 * each peer on its own channel. Two rounds: the opening round (every peer's block b started, so
 * the stream work before the call on that rank is done and its buffers may be read and written),
 * and the closing round (this block's reads of the peer's input and writes into its output are
 * done, so the peer may return). Nothing else orders the blocks: a block reads and writes only its
 * own range, and in place the thread that reads an element of a buffer is the one that writes it.
 * Ranges touched by two ranks are disjoint (rank r writes only the slice or part that is r's). */
#include <cuda_runtime.h>

#include <mscclpp/copy.h>
#include <mscclpp/memory_channel.h>

#include "algo/gpu/gpu.h"
#include "elem/reduce.cuh"
#include "algo/gpu/round.cuh"

__device__ __forceinline__ uint64_t zc_share(uint64_t len, uint64_t lo, uint64_t chunk) {
  return len > lo ? (len - lo < chunk ? len - lo : chunk) : 0;
}

/* GX_COPY: this block's range of every part into its rank's output, peers first, starting with
 * the next rank (so the ranks' first writes spread over the peers). */
__device__ void zc_put(const gpu_dev& d, const gx_plan& p, const gx_zc& z, uint64_t lo) {
  for (int i = 1; i <= d.nranks; i++) {
    int q = (d.rank + i) % d.nranks;
    uint64_t n = zc_share(p.send_len[q], lo, z.chunk);
    const char* src = p.src + p.send_off[q] + lo;
    char* dst = z.peer_dst[q] + p.recv_off[d.rank] + lo;
    if (n > 0 && src != dst) mscclppCopy(dst, src, n, threadIdx.x, blockDim.x);
  }
}

/* GX_REDUCE: this block's range of the own slice from every rank's input, into the own output
 * (and every peer's, put_reduced). */
template <int DT, int OP>
__device__ void zc_reduce(const gpu_dev& d, const gx_plan& p, const gx_zc& z, uint64_t lo) {
  uint64_t n = zc_share(p.recv_len[d.rank], lo, z.chunk);
  if (n == 0) return;
  const char* srcs[GPU_MAX_RANKS];
  char* dsts[GPU_MAX_RANKS];
  for (int r = 0; r < d.nranks; r++) srcs[r] = z.peer_src[r] + p.send_off[d.rank] + lo;
  int ndst = 0;
  dsts[ndst++] = p.dst + p.red_off + lo;
  for (int i = 1; i < d.nranks && z.put_reduced; i++) dsts[ndst++] = z.peer_dst[(d.rank + i) % d.nranks] + p.red_off + lo;
  red_range_to<DT, OP, true>(dsts, ndst, srcs, d.nranks, n / sizeof(typename Ty<DT>::T), threadIdx.x, blockDim.x);
}

/* Staged calls (z.staged): the stage is the bulk region of the scratch, laid out like the buffer
 * the peers would otherwise touch (input offsets for reductions, output offsets for copies). */
__device__ __forceinline__ char* zs_stage(const gpu_dev& d) { return d.scratch + d.ll_bytes; }

/* Before the opening round: this block's range of every part a peer reads (GX_REDUCE: part q of
 * the input, read by rank q) into the own stage at the same offset. */
__device__ void zs_stage_in(const gpu_dev& d, const gx_plan& p, const gx_zc& z, uint64_t lo) {
  for (int q = 0; q < d.nranks; q++) {
    uint64_t n = zc_share(p.send_len[q], lo, z.chunk);
    if (q != d.rank && n > 0) mscclppCopy(zs_stage(d) + p.send_off[q] + lo, p.src + p.send_off[q] + lo, n, threadIdx.x, blockDim.x);
  }
}

/* After the second round: this block's range of every part a peer wrote into the own stage (rank
 * q's reduced slice at its offset, or what q put at recv_off[q]) into the output. */
__device__ void zs_stage_out(const gpu_dev& d, const gx_plan& p, const gx_zc& z, uint64_t lo) {
  for (int q = 0; q < d.nranks; q++) {
    uint64_t off = p.mode == GX_COPY ? p.recv_off[q] : p.send_off[q];
    uint64_t n = zc_share(p.mode == GX_COPY ? p.recv_len[q] : p.send_len[q], lo, z.chunk);
    if (q != d.rank && n > 0) mscclppCopy(p.dst + off + lo, zs_stage(d) + off + lo, n, threadIdx.x, blockDim.x);
  }
}

/* Staged: stage in, opening round (the peers' stages hold their parts and their earlier kernels
 * are done with the stages), the zero-copy body over the stages, a round (every write into the own
 * stage landed), stage out, closing round (no peer's next kernel writes the own stage before it
 * was read). Reductions without put_reduced write no stage: their second round closes. */
template <int DT, int OP>
__device__ void zs_body(const gpu_dev& d, const gx_plan& p, const gx_zc& z, uint64_t lo) {
  bool out = p.mode == GX_COPY || z.put_reduced;
  if (p.mode == GX_REDUCE) zs_stage_in(d, p, z, lo);
  __syncthreads();
  if (gx_round(d, true)) return; /* the rank's device-error record says who timed out */
  if (p.mode == GX_COPY) zc_put(d, p, z, lo);
  else if (p.mode == GX_REDUCE) zc_reduce<DT, OP>(d, p, z, lo);
  __syncthreads();
  if (gx_round(d, true) || !out) return;
  zs_stage_out(d, p, z, lo);
  __syncthreads();
  (void)gx_round(d, true); /* the closing round */
}

template <int DT, int OP>
__global__ void __launch_bounds__(GPU_BULK_THREADS) zc_kernel(gpu_dev d, gx_plan p, gx_zc z) {
  uint64_t lo = (uint64_t)blockIdx.x * z.chunk;
  if (z.staged) {
    zs_body<DT, OP>(d, p, z, lo);
    return;
  }
  if (gx_round(d, true)) return; /* the rank's device-error record says who timed out */
  if (p.mode == GX_COPY) zc_put(d, p, z, lo);
  else if (p.mode == GX_REDUCE) zc_reduce<DT, OP>(d, p, z, lo);
  __syncthreads();
  (void)gx_round(d, true); /* the closing round */
}

typedef void (*zc_fn)(gpu_dev, gx_plan, gx_zc);
template <int DT, int OP>
struct ZcGet {
  typedef zc_fn fn;
  static fn get() { return zc_kernel<DT, OP>; }
};

extern "C" mscclppResult_t gpu_launch_zc(const struct gpu_dev* d, const struct gx_plan* p, const struct gx_zc* z,
                                         void* stream) {
  zc_fn k = GxPick<ZcGet>::pick(p->dtype, p->op);
  uint64_t blocks = z->chunk ? (p->maxlen + z->chunk - 1) / z->chunk : 1;
  if (blocks < 1) blocks = 1;
  k<<<(unsigned)blocks, GPU_BULK_THREADS, 0, (cudaStream_t)stream>>>(*d, *p, *z);
  return gpu_cuda_check(cudaGetLastError(), "zero-copy kernel launch");
}

extern "C" mscclppResult_t gpu_preload_zc(void) {
  return gpu_cuda_check(GxPick<ZcGet>::preload(), "loading the zero-copy kernels");
}
