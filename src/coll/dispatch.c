/* dispatch.c - the one place where a checked call meets an algorithm: rank kind, a registered
 * execution plan when one serves the call (registry/call.c), else selection among the built-in
 * algorithms (algo/select.c) and run. CPU and GPU algorithms are rows of algo/registry.c chosen by
 * the tuning rules; a group's sends and receives go to the CPU engine (algo/cpu/p2p.c) or the GPU
 * one (algo/gpu/p2p.c). */
#include <string.h>

#include "coll/coll.h"
#include "algo/cpu/net.h"
#include "algo/gpu/gpu.h"
#include "channel/ext.h"
#include "core/comm.h"
#include "coll/registry/registry.h"
#include "util/err.h"
#include "util/log.h"

/* Collectives need ranks of one kind (state.c records a mixed communicator as -1 - other_rank). */
static mscclppResult_t check_kind(const struct algo_comm* ac, const char* what) {
  if (ac->kind >= 0) return mscclppSuccess;
  int other = -1 - ac->kind;
  int mine = ac->comm->kind;
  return MPP_ERR(mscclppInvalidUsage, "%s: rank %d is a %s rank but rank %d is a %s rank; collectives need ranks of one kind",
                 what, ac->rank, mine == mscclppRankGpu ? "GPU" : "CPU", other, mine == mscclppRankGpu ? "CPU" : "GPU");
}

static mscclppResult_t not_built(const char* what) {
  return MPP_ERR(mscclppInvalidUsage, "%s: no GPU algorithm is registered for it", what);
}

/* On one rank every collective's output is its input: every operator is the identity on a single
 * input except premulsum, which scales it (and runs the algorithm). Returns 1 when it did the call:
 * a copy on the call's stream (GPU) or here (CPU), nothing in place. An algorithm forced by
 * MSCCLPP_ALGO runs instead (its cost without peers can then be measured on one GPU). */
static int one_rank(const struct algo_comm* ac, const struct algo_args* a, mscclppResult_t* res) {
  int red = algo_coll_reduces(a->coll);
  if (ac->nranks != 1 || (red && a->op == ELEM_OP_PREMUL) || algo_forced(a->coll, ac->kind)) return 0;
  size_t bytes = a->count * a->es;
  *res = mscclppSuccess;
  if (a->send == a->recv || bytes == 0) return 1;
  if (ac->kind == mscclppRankGpu) *res = gpu_copy_local(a->recv, a->send, bytes, a->stream);
  else memmove(a->recv, a->send, bytes);
  return 1;
}

static mscclppResult_t dispatch_here(struct algo_comm* ac, const struct algo_args* a) {
  const char* name = algo_coll_name(a->coll);
  MPP_CHECK(check_kind(ac, name));
  /* GPU ranks: a kernel cannot fail its call, which has returned; a dead rank or a device wait that
   * ran out fails the calls after it instead (CPU ranks' waits fail their own call) */
  if (ac->kind == mscclppRankGpu) MPP_CHECK(algo_health(ac->comm, name));
  int by_plan = 0;
  MPP_CHECK(planreg_dispatch(ac, a, &by_plan));
  if (by_plan) return mscclppSuccess;
  mscclppResult_t res;
  if (one_rank(ac, a, &res)) return res;
  const struct algo_desc* d = NULL;
  struct algo_args call = *a;
  call.captured = ac->kind == mscclppRankGpu && gpu_stream_captured(a->stream);
  algo_win_find(ac, &call);
  /* Buffers in registered windows reach peers without an exchange, and large calls on registered
   * buffers pay for one: eager calls on them may take the zero-copy algorithms, which the table
   * keeps for captured calls otherwise. */
  int zc_ok = call.captured || call.win[0] != NULL || call.registered;
  MPP_CHECK(algo_select(a->coll, ac->kind, ac->nranks, ac->nhosts, a->bytes, a->dtype, zc_ok, &d));
  if (d == NULL) {
    if (ac->kind == mscclppRankGpu) return not_built(name);
    return MPP_ERR(mscclppInternalError, "%s: no algorithm registered for CPU ranks", name);
  }
  LOG_TRACE_(LOG_SUB_ALGO, "%s of %zu bytes on %d ranks of %d hosts: %s", name, a->bytes, ac->nranks, ac->nhosts,
             d->name);
  return d->run(ac, &call);
}

/* The device of a GPU rank's communicator (-1 for CPU ranks). */
static int rank_device(const struct algo_comm* ac) { return ac->kind == mscclppRankGpu ? ac->comm->cuda_dev : -1; }

/* A GPU rank's call runs with its communicator's device current (and the caller's is restored):
 * a thread may drive ranks of several devices, as NCCL lets it. */
mscclppResult_t coll_dispatch(struct algo_comm* ac, const struct algo_args* a) {
  int dev = rank_device(ac), prev = ext_dev_enter(dev);
  mscclppResult_t res = dispatch_here(ac, a);
  ext_dev_leave(prev, dev);
  return res;
}

mscclppResult_t coll_dispatch_p2p(struct p2p_op* ops, int nops) {
  int gpu = 0;
  for (int i = 0; i < nops; i++) {
    MPP_CHECK(check_kind(ops[i].ac, "send/recv"));
    gpu |= ops[i].ac->kind == mscclppRankGpu;
  }
  if (!gpu) return cpu_p2p_run(ops, nops);
  for (int i = 0; i < nops; i++)
    if (i == 0 || ops[i].ac != ops[i - 1].ac) MPP_CHECK(algo_health(ops[i].ac->comm, "send/recv"));
  int dev = nops > 0 ? rank_device(ops[0].ac) : -1, prev = ext_dev_enter(dev);
  mscclppResult_t res = gpu_p2p_run(ops, nops); /* gpu_p2p_run refuses CPU ops */
  ext_dev_leave(prev, dev);
  return res;
}
