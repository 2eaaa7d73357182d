/* run.c - one call on a GPU rank: find (or make) what it needs - the plan's image, the scratch,
 * the buffer context, the port bindings - and launch the kernel. Once all are cached a call does
 * no allocation, no communication and no synchronization: a mutex, a few lookups, one driver call
 * per buffer (core/ubuf.c) and the launch, so it can be captured into a CUDA graph. */
#include "exec/gpu/gpu.h"

#include "elem/redop.h"
#include "channel/ext.h"
#include "core/comm.h"
#include "exec/gpu/state.h"
#include "util/err.h"

#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>

#include "exec/gpu/launch.h"

struct call {
  const void* send;
  void* recv;
  uint64_t sb, rb;
  int dtype, packet;
  uint64_t esize;
  void* stream;
};

/* The kernel's parameters for this call: the image's, then the call's buffers, channels and op
 * tables (tab: NULL when the kernel works them out). */
static void params(const struct xg_state* st, const struct xg_image* img, const struct xg_ctx* ctx,
                   const uint32_t* ports, const char* tab, const struct plan_layout* l, const struct call* c,
                   struct xg_params* p) {
  *p = img->p;
  p->port_ids = ports;
  p->tab = tab;
  p->io = ctx->dev;
  p->io_reg = ctx->dev + 2 * st->nranks;
  p->scr = st->scr_dev;
  p->msem = st->msem_dev;
  p->pch = st->pch_dev;
  p->words = st->words;
  p->err = st->err_dev;
  p->wait = st->wait;
  xg_layout_of(l, &p->layout);
  p->rank = st->rank, p->dtype = c->dtype, p->esize = (int32_t)c->esize, p->pkt = c->packet;
}

/* Threads per block of this call: at every op each warp of a block adds to its barrier and its
 * decoding, so a small call gets a thread per thread_bytes of the larger buffer's share per block
 * (whole warps, at least 64), never more than the plan's. The ops split their work over however
 * many threads run, so the count changes only the time. */
static int call_threads(const struct xg_state* st, const struct xg_image* img, const struct call* c) {
  if (st->thread_bytes <= 0 || img->nblocks <= 0) return img->threads;
  uint64_t big = c->sb > c->rb ? c->sb : c->rb;
  uint64_t want = big / (uint64_t)img->nblocks / (uint64_t)st->thread_bytes + 1;
  want = (want + 31) / 32 * 32;
  if (want < 64) want = 64;
  return want < (uint64_t)img->threads ? (int)want : img->threads;
}

static mscclppResult_t run_locked(struct xg_state* st, struct mscclppPlan* plan, const struct call* c) {
  MPP_CHECK(xg_check(st));
  struct plan_layout l;
  MPP_CHECK(plan_layout_get(plan, c->sb, c->rb, &l));
  struct xg_image* img = NULL;
  MPP_CHECK(xg_image_get(st, plan, c->stream, &img));
  MPP_CHECK(xg_image_check_sizes(img, plan, &l, c->esize));
  if (l.scr_bytes && (!st->scr || l.scr_bytes > st->scr_cap)) {
    MPP_CHECK(xg_scratch_ensure(st, l.scr_bytes));
  }
  struct xg_ctx* ctx = NULL;
  MPP_CHECK(xg_ctx_get(st, c->send, c->sb, c->recv, c->rb, c->stream, &ctx));
  const uint32_t* ports = NULL;
  const char* tab = NULL;
  MPP_CHECK(xg_bind_get(st, img, plan, &l, ctx, c->stream, &ports, &tab));
  struct xg_params p;
  params(st, img, ctx, ports, tab, &l, c, &p);
  int threads = call_threads(st, img, c);
  int grid = img->nblocks > 0 ? img->nblocks : 1;
  cudaError_t e = (cudaError_t)xg_launch(&p, img->lean, grid, threads, img->smem, c->stream);
  if (e != cudaSuccess)
    return MPP_ERR(mscclppUnhandledCudaError, "%s: launching the executor kernel on rank %d (%d blocks of %d threads): %s",
                   plan->file, st->rank, img->nblocks, threads, cudaGetErrorString(e));
  return mscclppSuccess;
}

mscclppResult_t exec_gpu_run(struct mscclppComm* comm, struct mscclppPlan* plan, const void* send, void* recv,
                             uint64_t send_bytes, uint64_t recv_bytes, int dtype, void* stream, int packet) {
  struct call c = {.send = send, .recv = recv, .sb = send_bytes, .rb = recv_bytes, .dtype = dtype, .packet = packet,
                   .esize = elem_dtype_size(dtype), .stream = stream};
  if (!c.esize) return MPP_ERR(mscclppInvalidArgument, "executor: unknown datatype %d", dtype);
  if (packet != EXEC_GPU_LL16 && packet != EXEC_GPU_LL8)
    return MPP_ERR(mscclppInvalidArgument, "executor: packet format %d; LL16 (16) or LL8 (8)", packet);
  /* The call may be being captured into a CUDA graph, its first call with a plan and buffers
   * included: relaxed mode lets this thread make the driver calls setup needs (allocation, IPC
   * mapping), none of which touches the captured stream or the legacy stream (fills and uploads
   * go through the setup stream, sys/gpu.h). */
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  struct xg_state* st = NULL;
  mscclppResult_t res = xg_get(comm, &st);
  if (res == mscclppSuccess) {
    pthread_mutex_lock(&st->mu);
    int prev = ext_dev_enter(st->dev);
    res = run_locked(st, plan, &c);
    ext_dev_leave(prev, st->dev);
    pthread_mutex_unlock(&st->mu);
  }
  cudaThreadExchangeStreamCaptureMode(&mode);
  return res;
}

mscclppResult_t exec_gpu_check(struct mscclppComm* comm) {
  struct xg_state* st = comm->kind == mscclppRankGpu ? comm_ext_peek(comm, COMM_EXT_EXEC) : NULL;
  if (!st) return mscclppSuccess;
  pthread_mutex_lock(&st->mu);
  mscclppResult_t res = xg_check(st);
  pthread_mutex_unlock(&st->mu);
  return res;
}

#else /* no CUDA: there are no GPU ranks */

mscclppResult_t exec_gpu_run(struct mscclppComm* comm, struct mscclppPlan* plan, const void* send, void* recv,
                             uint64_t send_bytes, uint64_t recv_bytes, int dtype, void* stream, int packet) {
  (void)comm, (void)plan, (void)send, (void)recv, (void)send_bytes, (void)recv_bytes, (void)dtype, (void)stream,
      (void)packet;
  return MPP_ERR(mscclppInvalidUsage, "GPU executor: this library was built without CUDA");
}

mscclppResult_t exec_gpu_check(struct mscclppComm* comm) {
  (void)comm;
  return mscclppSuccess;
}

#endif
