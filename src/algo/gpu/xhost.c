/* xhost.c - the state of GPU ranks on several hosts (xhost.h): the layout, the two child
 * communicators of the hierarchical family, the pinned stage, and the host steps queued on the
 * calls' streams. */
#include "algo/gpu/xhost.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/cpu/hier.h"
#include "algo/cpu/net.h"
#include "core/comm.h"
#include "elem/reduce.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/timeutil.h"

size_t xh_piece(size_t es) {
  int64_t p = param_int(PARAM_ALGO_GPU_HOST_CHUNK);
  size_t n = p > 0 ? (size_t)p / es : 0;
  return n > 0 ? n : 1;
}

#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>

#include "algo/gpu/gpu.h"

#define XH_SPLIT_TAG 0x58480000 /* bootstrap tags of the children's unique ids ("XH") */

struct xh_mem {
  void* ptr;
  struct xh_mem* next;
};

/* One host step: what its host function runs. */
struct xh_step {
  struct gpu_xhost* x;
  struct algo_comm* cac; /* collective: the CPU pipes' communicator */
  const struct algo_desc* d;
  struct algo_args a;
  int divide;
  const void* scalar; /* pinned copy of a device-resident premulsum scalar, read when the step runs */
  struct p2p_op* ops; /* sends/receives (nops of them; 0: a collective), ops_cap long */
  int nops, ops_cap;
  int kept; /* captured: stays for the graph's later runs (freed at teardown) */
  struct xh_step* next;     /* on x->idle */
  struct xh_step* all_next; /* on x->all */
};

mscclppResult_t xh_get(struct algo_comm* ac, struct gpu_xhost** out) {
  struct gpu_xhost* x = ac->xh;
  if (x == NULL) {
    const struct cpu_hier* lay;
    MPP_CHECK(cpu_hier_get(ac, &lay));
    x = calloc(1, sizeof(*x));
    if (x == NULL) return MPP_ERR(mscclppSystemError, "GPU collectives across hosts: out of host memory");
    x->ac = ac, x->lay = lay, x->nhosts = lay->nhosts;
    x->host = lay->host_of[ac->rank], x->lrank = lay->local_of[ac->rank], x->lsize = hier_size(lay, x->host);
    x->uniform = 1;
    for (int h = 0; h < lay->nhosts; h++)
      if (hier_size(lay, h) != x->lsize) x->uniform = 0;
    ac->xh = x;
  }
  if (atomic_load_explicit(&x->failed, memory_order_acquire))
    return MPP_ERR(x->err, "GPU collectives across hosts: an earlier call failed in its host step: %s", x->msg);
  *out = x;
  return mscclppSuccess;
}

/* Makes this rank's member of a child of the ranks members[0..n) (child rank = index): the first
 * one makes a unique id and sends it to the others over the parent's bootstrap. */
static mscclppResult_t make_child(struct gpu_xhost* x, const int* members, int n, int kind, int tag, mscclppComm_t* out) {
  struct mscclppComm* comm = x->ac->comm;
  int me = -1;
  for (int i = 0; i < n; i++)
    if (members[i] == comm->rank) me = i;
  mscclppUniqueId id;
  if (me == 0) {
    MPP_CHECK(mscclppGetUniqueId(&id));
    for (int i = 1; i < n; i++) MPP_CHECK(mscclppBootstrapSend(comm, members[i], tag, &id, sizeof(id)));
  } else {
    MPP_CHECK(mscclppBootstrapRecv(comm, members[0], tag, &id, sizeof(id)));
  }
  mscclppConfig_t cfg = MSCCLPP_CONFIG_INITIALIZER;
  cfg.rankKind = kind;
  cfg.cudaDevice = kind == mscclppRankGpu ? comm->cuda_dev : -1;
  return mscclppCommInitRankConfig(out, n, id, me, &cfg);
}

static mscclppResult_t make_children(struct gpu_xhost* x) {
  int* rail = calloc((size_t)x->nhosts, sizeof(int));
  if (rail == NULL) return MPP_ERR(mscclppSystemError, "GPU collectives across hosts: out of host memory");
  for (int h = 0; h < x->nhosts; h++) rail[h] = hier_rank(x->lay, h, x->lrank);
  mscclppResult_t res =
      make_child(x, x->lay->members + x->lay->first[x->host], x->lsize, mscclppRankGpu, XH_SPLIT_TAG, &x->local);
  if (res == mscclppSuccess) res = make_child(x, rail, x->nhosts, mscclppRankCpu, XH_SPLIT_TAG + 1, &x->rail);
  free(rail);
  return res;
}

mscclppResult_t xh_children(struct gpu_xhost* x) {
  if (x->children == 1) return mscclppSuccess;
  if (x->children < 0) return MPP_ERR(mscclppInvalidUsage, "GPU collectives across hosts: making the host communicators failed earlier");
  if (!x->uniform)
    return MPP_ERR(mscclppInternalError, "GPU collectives across hosts: the hierarchical family needs hosts of one size");
  /* Init makes no stream work, but a first call under capture needs relaxed mode for its driver
   * calls (as gpu_net_get). */
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  mscclppResult_t res = make_children(x);
  if (res == mscclppSuccess) res = xh_preload(); /* the cross-host reductions: loaded now, not at a first launch */
  cudaThreadExchangeStreamCaptureMode(&mode);
  x->children = res == mscclppSuccess ? 1 : -1;
  if (res == mscclppSuccess)
    LOG_INFO_(LOG_SUB_ALGO, "GPU collectives across hosts: host %d of %d, local rank %d of %d: host and rail communicators made",
              x->host, x->nhosts, x->lrank, x->lsize);
  return res;
}

/* " (its rank i is rank R here, ...)": the ranks of a child in the communicator's numbering. */
static void child_ranks(const struct gpu_xhost* x, int rail, char* buf, size_t len) {
  int n = snprintf(buf, len, " (%s: its rank", rail ? "the rail between hosts" : "this host's GPU ranks");
  int k = rail ? x->nhosts : x->lsize;
  for (int i = 0; i < k && n > 0 && (size_t)n < len; i++) {
    int r = rail ? hier_rank(x->lay, i, x->lrank) : hier_rank(x->lay, x->host, i);
    n += snprintf(buf + n, len - (size_t)n, "%s %d is rank %d", i ? "," : "", i, r);
  }
  if (n > 0 && (size_t)n < len) snprintf(buf + n, len - (size_t)n, " of the communicator)");
}

mscclppResult_t xh_children_health(struct gpu_xhost* x) {
  for (int rail = 0; rail < 2; rail++) {
    mscclppComm_t c = rail ? x->rail : x->local;
    if (c == NULL) continue;
    mscclppResult_t res = algo_health(c, "GPU collectives across hosts");
    if (res != mscclppSuccess) {
      char who[256];
      child_ranks(x, rail, who, sizeof(who));
      return MPP_ERR(res, "%s%s", err_copy().text, who);
    }
  }
  return mscclppSuccess;
}

/* The stage's first XH_STAGE_HEAD bytes hold the premulsum scalar of the next host step (copied
 * there on the stream before it); callers get what follows. */
#define XH_STAGE_HEAD 64

mscclppResult_t xh_stage(struct gpu_xhost* x, size_t bytes, char** out) {
  bytes += XH_STAGE_HEAD;
  if (bytes <= x->stage_bytes) {
    *out = x->stage + XH_STAGE_HEAD;
    return mscclppSuccess;
  }
  size_t want = bytes < 4096 ? 4096 : bytes;
  if (want < 2 * x->stage_bytes) want = 2 * x->stage_bytes;
  struct xh_mem* old = NULL;
  if (x->stage != NULL) {
    old = calloc(1, sizeof(*old));
    if (old == NULL) return MPP_ERR(mscclppSystemError, "GPU collectives across hosts: out of host memory");
  }
  void* p = NULL;
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  cudaError_t e = cudaHostAlloc(&p, want, cudaHostAllocPortable | cudaHostAllocMapped);
  void* dev = NULL;
  if (e == cudaSuccess && (e = cudaHostGetDevicePointer(&dev, p, 0)) != cudaSuccess) cudaFreeHost(p);
  cudaThreadExchangeStreamCaptureMode(&mode);
  if (e != cudaSuccess) {
    free(old);
    return MPP_ERR(mscclppSystemError, "GPU collectives across hosts: %zu bytes of pinned host memory: %s", want,
                   cudaGetErrorString(e));
  }
  if (old != NULL) {
    old->ptr = x->stage, old->next = x->retired;
    x->retired = old;
  }
  x->stage = p, x->stage_dev = dev, x->stage_bytes = want;
  *out = x->stage + XH_STAGE_HEAD;
  return mscclppSuccess;
}

static mscclppResult_t copy2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows,
                              enum cudaMemcpyKind kind, void* stream) {
  if (width == 0 || rows == 0) return mscclppSuccess;
  cudaError_t e = rows == 1 ? cudaMemcpyAsync(dst, src, width, kind, (cudaStream_t)stream)
                            : cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, kind, (cudaStream_t)stream);
  return gpu_cuda_check(e, kind == cudaMemcpyDeviceToHost ? "staging to host memory (cudaMemcpy2DAsync)"
                                                          : "copying from host memory (cudaMemcpy2DAsync)");
}

mscclppResult_t xh_d2h(void* host, size_t hpitch, const void* dev, size_t dpitch, size_t width, size_t rows, void* stream) {
  return copy2d(host, hpitch, dev, dpitch, width, rows, cudaMemcpyDeviceToHost, stream);
}

mscclppResult_t xh_h2d(void* dev, size_t dpitch, const void* host, size_t hpitch, size_t width, size_t rows, void* stream) {
  return copy2d(dev, dpitch, host, hpitch, width, rows, cudaMemcpyHostToDevice, stream);
}

/* Returns s to the pool (a host function's last touch of it): pushed onto x->returned without a
 * lock. Only pushes race with each other here (the taker empties the whole stack at once), so a
 * compare-and-swap on the top suffices. */
static void step_give_back(struct gpu_xhost* x, struct xh_step* s) {
  struct xh_step* top = atomic_load_explicit(&x->returned, memory_order_relaxed);
  do s->next = top; /* release on success: the taker that sees s sees s->next and s's contents */
  while (!atomic_compare_exchange_weak_explicit(&x->returned, &top, s, memory_order_release, memory_order_relaxed));
}

/* A step record for the next host step, its ops array at least nops long: an idle one when there
 * is one, so that a call allocates nothing once the pool has grown to what is in flight. */
static mscclppResult_t step_take(struct gpu_xhost* x, int nops, struct xh_step** out) {
  /* acquire: pairs with the host functions' release pushes; their records are complete */
  if (x->idle == NULL) x->idle = atomic_exchange_explicit(&x->returned, NULL, memory_order_acquire);
  struct xh_step* s = x->idle;
  if (s != NULL) x->idle = s->next;
  if (s == NULL) {
    s = calloc(1, sizeof(*s));
    if (s == NULL) return MPP_ERR(mscclppSystemError, "GPU collectives across hosts: out of host memory");
    s->all_next = x->all, x->all = s; /* x->all is only touched on the calling thread */
  }
  if (nops > s->ops_cap) {
    struct p2p_op* ops = realloc(s->ops, (size_t)nops * sizeof(*ops));
    if (ops == NULL) {
      step_give_back(x, s);
      return MPP_ERR(mscclppSystemError, "GPU send/recv across hosts: out of host memory for %d ops", nops);
    }
    s->ops = ops, s->ops_cap = nops;
  }
  struct p2p_op* ops = s->ops;
  struct xh_step* all_next = s->all_next;
  int cap = s->ops_cap;
  memset(s, 0, sizeof(*s));
  s->ops = ops, s->ops_cap = cap, s->all_next = all_next, s->x = x;
  *out = s;
  return mscclppSuccess;
}

/* Records the first failure of a host step: later steps skip their work and later calls fail. A
 * step on the rail names the rail's ranks, which the message then translates. */
static void step_failed(struct gpu_xhost* x, const struct xh_step* s, mscclppResult_t res, const char* what) {
  int none = 0; /* one writer of err and msg, should host steps of two streams fail at once */
  if (!atomic_compare_exchange_strong(&x->failing, &none, 1)) return;
  x->err = res;
  char who[256] = "";
  if (s->cac != x->ac) child_ranks(x, 1, who, sizeof(who));
  snprintf(x->msg, sizeof(x->msg), "%s: %s%s", what, err_last(), who);
  LOG_WARN_(LOG_SUB_ALGO, "GPU collectives across hosts: a host step failed (the calls after it fail): %s", x->msg);
  /* release: a thread that sees failed set reads err and msg as written above */
  atomic_store_explicit(&x->failed, 1, memory_order_release);
}

/* The host function: runs the step unless an earlier one failed. Makes no CUDA call (CUDA forbids
 * them here): the CPU machinery moves host memory only. */
static void CUDART_CB step_run(void* arg) {
  struct xh_step* s = arg;
  struct gpu_xhost* x = s->x;
  uint64_t t0 = time_now_ns();
  if (!atomic_load_explicit(&x->failed, memory_order_acquire)) {
    mscclppResult_t res;
    if (s->nops > 0) {
      res = cpu_p2p_run(s->ops, s->nops);
      if (res != mscclppSuccess) step_failed(x, s, res, "send/recv");
    } else {
      if (s->scalar != NULL) s->a.scalar = elem_scalar_from(s->scalar, s->a.dtype);
      res = s->d->run(s->cac, &s->a);
      if (res != mscclppSuccess) step_failed(x, s, res, s->d->name);
      else if (s->divide > 0) {
        const void* src = s->a.recv;
        elem_reduce(s->a.recv, &src, 1, s->a.count, s->a.dtype, ELEM_OP_AVG, s->divide, NULL);
      }
    }
  }
  /* relaxed: statistics only; teardown reads them after synchronizing the device */
  atomic_fetch_add_explicit(&x->step_count, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&x->step_ns, time_now_ns() - t0, memory_order_relaxed);
  if (!s->kept) step_give_back(x, s);
}

static mscclppResult_t enqueue(struct gpu_xhost* x, void* stream, struct xh_step* s) {
  /* kept is decided before the launch: an eager step may have run, and gone back to the pool (and
   * out again to another thread's call), by the time cudaLaunchHostFunc returns */
  int kept = gpu_stream_captured(stream);
  s->x = x, s->kept = kept;
  cudaError_t e = cudaLaunchHostFunc((cudaStream_t)stream, step_run, s);
  if (e != cudaSuccess) {
    step_give_back(x, s);
    return gpu_cuda_check(e, "queueing a host step (cudaLaunchHostFunc)");
  }
  return mscclppSuccess; /* a kept step never goes back to the pool: teardown frees it (x->all) */
}

mscclppResult_t xh_host_coll(struct gpu_xhost* x, void* stream, struct algo_comm* cac, const struct algo_desc* d,
                             const struct algo_args* a, int divide) {
  struct xh_step* s;
  MPP_CHECK(step_take(x, 0, &s));
  s->cac = cac, s->d = d, s->a = *a, s->divide = divide;
  if (a->op == ELEM_OP_PREMUL && a->scalar_dev != NULL) { /* the value when the step runs, as a kernel would read it */
    char* stage;
    mscclppResult_t res = xh_stage(x, 0, &stage);
    if (res == mscclppSuccess) res = xh_d2h(x->stage, a->es, a->scalar_dev, a->es, a->es, 1, stream);
    if (res != mscclppSuccess) {
      step_give_back(x, s);
      return res;
    }
    s->scalar = x->stage;
  }
  s->a.stream = NULL, s->a.scalar_dev = NULL, s->a.captured = 0, s->a.registered = 0;
  s->a.win[0] = s->a.win[1] = NULL;
  return enqueue(x, stream, s);
}

mscclppResult_t xh_host_p2p(struct gpu_xhost* x, void* stream, const struct p2p_op* ops, int nops) {
  struct xh_step* s;
  MPP_CHECK(step_take(x, nops, &s));
  memcpy(s->ops, ops, (size_t)nops * sizeof(*ops));
  s->nops = nops;
  return enqueue(x, stream, s);
}

void xh_free(struct gpu_xhost* x, int abort) {
  if (x == NULL) return;
  if (x->ac->comm->cuda_dev >= 0) cudaSetDevice(x->ac->comm->cuda_dev);
  if (abort) { /* a host step inside the rail returns Aborted instead of waiting out its peers */
    if (x->rail) mscclppCommAbort(x->rail);
    if (x->local) mscclppCommAbort(x->local);
    x->rail = x->local = NULL;
  }
  cudaDeviceSynchronize(); /* queued host steps use the stage and the pipes */
  if (x->local) mscclppCommDestroy(x->local);
  if (x->rail) mscclppCommDestroy(x->rail);
  int records = 0;
  while (x->all) { /* idle, kept, and any a failed launch left: every host function has run */
    struct xh_step* s = x->all;
    records++;
    x->all = s->all_next;
    free(s->ops);
    free(s);
  }
  LOG_INFO_(LOG_SUB_ALGO, "GPU collectives across hosts: %llu host steps ran for %.3f ms in all; %d step records "
            "were made (the most in flight, and those kept by graphs)", (unsigned long long)atomic_load(&x->step_count),
            (double)atomic_load(&x->step_ns) / 1e6, records);
  free(x->p2p_tmp);
  while (x->retired) {
    struct xh_mem* m = x->retired;
    x->retired = m->next;
    cudaFreeHost(m->ptr);
    free(m);
  }
  if (x->stage) cudaFreeHost(x->stage);
  free(x);
}

#else /* CPU-only build: there are no GPU ranks */

mscclppResult_t xh_get(struct algo_comm* ac, struct gpu_xhost** out) {
  (void)ac, (void)out;
  return MPP_ERR(mscclppInvalidUsage, "GPU collectives: this library was built without CUDA");
}

void xh_free(struct gpu_xhost* x, int abort) { (void)x, (void)abort; }

#endif
