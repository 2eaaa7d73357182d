/* ce.c - the copy-engine collectives (allreduce, allgather, reducescatter, alltoall) for calls being
 * captured into a CUDA graph: the data crosses NVLink as cudaMemcpyAsync copies (the copy engines,
 * ~397 GB/s on H200 against ~369 for SM stores) between the users' buffers, which every rank maps
 * at capture as for the zero-copy kernels (gpu_graph_only_begin), and SMs only reduce, locally.
 *
 * One call, on the caller's stream and side streams forked from it (captured: the copies become
 * graph nodes that run concurrently, one stream per peer and direction):
 *   1. the opening round (ce.cu): every peer reached this call, so its buffers may be read and
 *      written;
 *   2. allgather / alltoall: one copy per part, from the own input straight into its rank's output.
 *      reducescatter / allreduce: the own slice is cut into steps of MSCCLPP_ALGO_GPU_CE_CHUNK
 *      bytes; per step every peer's part of it is pulled from the peer's input into a local buffer
 *      (two steps' worth, so step k + 1 is pulled while step k reduces), reduced locally in rank
 *      order with the own part into the output, and (allreduce) pushed into every peer's output;
 *   3. the closing round: this rank's copies into and out of every peer's buffers are done (a copy
 *      node completes only once its writes have landed), so the peers may return.
 * Ranges that two ranks touch are disjoint, as in zc.cu: rank r reads and writes only the slice or
 * part that is r's, so in-place calls are safe.
 *
 * Calls outside capture, premulsum and empty calls, and in-place alltoall run the bulk sibling
 * (gpu_graph_only_begin), as the zero-copy algorithms do. */
#include <stdlib.h>

#include "algo/algo.h"
#include "algo/gpu/gpu.h"
#include "channel/ext.h"
#include "util/err.h"
#include "util/param.h"

#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>

#define CE_PULL 0
#define CE_PUSH 1

/* The side streams (pull from / push to each peer; the own part's copy goes on pull[rank]), their
 * events, and the local buffer of pulled parts: 2 parities x nranks slots of `chunk` bytes. */
struct gpu_ce {
  cudaStream_t side[2][GPU_MAX_RANKS];
  cudaEvent_t side_done[2][GPU_MAX_RANKS];
  cudaEvent_t fork, reduced[2];
  char* buf;
  uint64_t chunk;
};

void gpu_ce_free(struct gpu_ce* ce) {
  if (ce == NULL) return;
  for (int d = 0; d < 2; d++)
    for (int q = 0; q < GPU_MAX_RANKS; q++) {
      if (ce->side[d][q]) cudaStreamDestroy(ce->side[d][q]);
      if (ce->side_done[d][q]) cudaEventDestroy(ce->side_done[d][q]);
    }
  if (ce->fork) cudaEventDestroy(ce->fork);
  for (int i = 0; i < 2; i++)
    if (ce->reduced[i]) cudaEventDestroy(ce->reduced[i]);
  if (ce->buf) cudaFree(ce->buf);
  free(ce);
}

/* The streams and events (once), and the buffer of pulled parts when `reduce` asks for it (only
 * reductions use it). */
static cudaError_t ce_make(struct gpu_ce* ce, int nranks, int reduce) {
  cudaError_t e = cudaSuccess;
  if (ce->fork != NULL) /* made before */
    return reduce && ce->buf == NULL ? cudaMalloc((void**)&ce->buf, (size_t)(2ull * (uint64_t)nranks * ce->chunk)) : e;
  for (int d = 0; d < 2 && e == cudaSuccess; d++)
    for (int q = 0; q < nranks && e == cudaSuccess; q++) {
      e = cudaStreamCreateWithFlags(&ce->side[d][q], cudaStreamNonBlocking);
      if (e == cudaSuccess) e = cudaEventCreateWithFlags(&ce->side_done[d][q], cudaEventDisableTiming);
    }
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&ce->fork, cudaEventDisableTiming);
  for (int i = 0; i < 2 && e == cudaSuccess; i++) e = cudaEventCreateWithFlags(&ce->reduced[i], cudaEventDisableTiming);
  if (e == cudaSuccess && reduce) e = cudaMalloc((void**)&ce->buf, (size_t)(2ull * (uint64_t)nranks * ce->chunk));
  return e;
}

/* The state, made on the first copy-engine call, its buffer on the first reduction (either may be
 * under capture: the allocations run in relaxed capture mode, none of them touches a stream). A
 * failure leaves nothing half made: the next call tries again. */
static mscclppResult_t ce_get(struct gpu_net* g, int reduce, struct gpu_ce** out) {
  struct gpu_ce* ce = g->ce;
  if (ce != NULL && (ce->buf != NULL || !reduce)) {
    *out = ce;
    return mscclppSuccess;
  }
  if (ce == NULL) {
    int64_t chunk = param_int(PARAM_ALGO_GPU_CE_CHUNK);
    if (chunk < 16)
      return MPP_ERR(mscclppInvalidArgument, "MSCCLPP_ALGO_GPU_CE_CHUNK=%lld: need at least 16 bytes", (long long)chunk);
    ce = calloc(1, sizeof(*ce));
    if (ce == NULL) return MPP_ERR(mscclppSystemError, "GPU collectives: out of host memory");
    ce->chunk = (uint64_t)chunk / 16 * 16;
  }
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  int prev = ext_dev_enter(g->dev);
  cudaError_t e = ce_make(ce, g->d.nranks, reduce);
  ext_dev_leave(prev, g->dev);
  cudaThreadExchangeStreamCaptureMode(&mode);
  if (e != cudaSuccess) {
    if (ce != g->ce) gpu_ce_free(ce);
    return gpu_cuda_check(e, "setting up the copy-engine collectives");
  }
  g->ce = *out = ce;
  return mscclppSuccess;
}

/* Side stream (dir, q) waits for what `after` last recorded, then copies bytes. */
static cudaError_t ce_copy(struct gpu_ce* ce, int dir, int q, cudaEvent_t after, void* dst, const void* src,
                           uint64_t bytes) {
  cudaStream_t s = ce->side[dir][q];
  cudaError_t e = after ? cudaStreamWaitEvent(s, after, 0) : cudaSuccess;
  if (e == cudaSuccess) e = cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDeviceToDevice, s);
  return e;
}

/* stream waits for the last work of side stream (dir, q). */
static cudaError_t ce_join(struct gpu_ce* ce, int dir, int q, cudaStream_t stream) {
  cudaError_t e = cudaEventRecord(ce->side_done[dir][q], ce->side[dir][q]);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(stream, ce->side_done[dir][q], 0);
  return e;
}

/* GX_COPY: every part straight into its rank's output (the own part too, unless in place). */
static mscclppResult_t ce_parts(struct gpu_ce* ce, const struct gpu_dev* d, const struct gx_plan* p,
                                const struct gx_zc* z, cudaStream_t stream) {
  cudaError_t e = cudaEventRecord(ce->fork, stream);
  for (int i = 1; i <= d->nranks && e == cudaSuccess; i++) {
    int q = (d->rank + i) % d->nranks;
    const char* src = p->src + p->send_off[q];
    char* dst = z->peer_dst[q] + p->recv_off[d->rank];
    if (p->send_len[q] == 0 || src == dst) continue;
    e = ce_copy(ce, CE_PULL, q, ce->fork, dst, src, p->send_len[q]);
    if (e == cudaSuccess) e = ce_join(ce, CE_PULL, q, stream);
  }
  return gpu_cuda_check(e, "copy-engine copies");
}

/* One step of the own slice: bytes [lo, +n). Pulls every peer's part into parity par's slots, reduces
 * them with the own part into the output, and with ag pushes the result into every peer's output. */
static mscclppResult_t ce_step(struct gpu_ce* ce, const struct gpu_dev* d, const struct gx_plan* p,
                               const struct gx_zc* z, int ag, uint64_t k, uint64_t lo, uint64_t n, cudaStream_t stream) {
  int par = (int)(k & 1);
  char* slots = ce->buf + (uint64_t)par * (uint64_t)d->nranks * ce->chunk;
  const char* srcs[GPU_MAX_RANKS];
  /* Slots of parity par were last read by step k - 2's reduction; the first step waits the fork. */
  cudaEvent_t after = k == 0 ? ce->fork : k >= 2 ? ce->reduced[par] : NULL;
  cudaError_t e = cudaSuccess;
  for (int i = 1; i <= d->nranks && e == cudaSuccess; i++) {
    int q = (d->rank + i) % d->nranks;
    srcs[q] = q == d->rank ? p->src + p->send_off[q] + lo : slots + (uint64_t)q * ce->chunk;
    if (q == d->rank) continue;
    e = ce_copy(ce, CE_PULL, q, after, (char*)srcs[q], z->peer_src[q] + p->send_off[d->rank] + lo, n);
    if (e == cudaSuccess) e = ce_join(ce, CE_PULL, q, stream);
  }
  MPP_CHECK(gpu_cuda_check(e, "copy-engine pulls"));
  char* out = p->dst + p->red_off + lo;
  MPP_CHECK(gpu_launch_ce_reduce(p->dtype, p->op, out, srcs, d->nranks, n, stream));
  e = cudaEventRecord(ce->reduced[par], stream);
  for (int i = 1; i < d->nranks && ag && e == cudaSuccess; i++) {
    int q = (d->rank + i) % d->nranks;
    e = ce_copy(ce, CE_PUSH, q, ce->reduced[par], z->peer_dst[q] + p->red_off + lo, out, n);
  }
  return gpu_cuda_check(e, "copy-engine pushes");
}

/* GX_REDUCE: the own slice in steps; then the caller's stream waits for every push. */
static mscclppResult_t ce_reduce(struct gpu_ce* ce, const struct gpu_dev* d, const struct gx_plan* p,
                                 const struct gx_zc* z, int ag, cudaStream_t stream) {
  uint64_t len = p->recv_len[d->rank], k = 0;
  MPP_CHECK(gpu_cuda_check(cudaEventRecord(ce->fork, stream), "copy-engine fork"));
  for (uint64_t lo = 0; lo < len; lo += ce->chunk, k++)
    MPP_CHECK(ce_step(ce, d, p, z, ag, k, lo, len - lo < ce->chunk ? len - lo : ce->chunk, stream));
  cudaError_t e = cudaSuccess;
  for (int q = 0; q < d->nranks && ag && len > 0 && e == cudaSuccess; q++)
    if (q != d->rank) e = ce_join(ce, CE_PUSH, q, stream);
  return gpu_cuda_check(e, "copy-engine join");
}

mscclppResult_t gpu_coll_ce(struct algo_comm* ac, const struct algo_args* a) {
  struct gpu_net* g = NULL;
  struct gpu_ce* ce = NULL;
  struct gx_zc z;
  struct gx_plan p[2];
  int go = 0;
  MPP_CHECK(gpu_graph_only_begin(ac, a, &g, &z, p, &go));
  if (!go) return gpu_bulk_of(a->coll)(ac, a);
  MPP_CHECK(ce_get(g, p[0].mode == GX_REDUCE, &ce));
  cudaStream_t stream = (cudaStream_t)a->stream;
  MPP_CHECK(gpu_launch_ce_round(&g->d, stream));
  if (p[0].mode == GX_COPY) MPP_CHECK(ce_parts(ce, &g->d, &p[0], &z, stream));
  else MPP_CHECK(ce_reduce(ce, &g->d, &p[0], &z, a->coll == ALGO_COLL_ALLREDUCE, stream));
  MPP_CHECK(gpu_launch_ce_round(&g->d, stream));
  g->graph_launches++;
  return mscclppSuccess;
}

#else /* no CUDA: never captured */

void gpu_ce_free(struct gpu_ce* ce) { (void)ce; }

mscclppResult_t gpu_coll_ce(struct algo_comm* ac, const struct algo_args* a) { return gpu_bulk_of(a->coll)(ac, a); }

#endif
