/* p2p.c - a group's sends and receives on GPU ranks, through the bulk kernel in p2p mode: only
 * the pairs that exchange data take part, each for as many steps as its larger direction needs.
 * The j-th send from A to B meets the j-th receive at B from A: launch j of a communicator carries
 * the j-th op of every (peer, direction), so both sides of a pair put the same ops in the same
 * launch and agree on its length. Ops go on the stream of the first op of the communicator. */
#include <string.h>

#include "algo/algo.h"
#include "algo/gpu/gpu.h"
#include "algo/gpu/xhost.h"
#include "util/err.h"

/* Fills launch j of ac's ops; returns 0 when no op is left for it. */
static int plan_launch(struct p2p_op* ops, int nops, struct algo_comm* ac, int j, struct gx_plan* p, void** stream) {
  int seen_send[GPU_MAX_RANKS] = {0}, seen_recv[GPU_MAX_RANKS] = {0}, any = 0;
  memset(p, 0, sizeof(*p));
  p->mode = GX_COPY, p->dtype = 1, p->op = ELEM_OP_SUM, p->p2p = 1;
  for (int i = 0; i < nops; i++) {
    struct p2p_op* o = &ops[i];
    if (o->ac != ac) continue;
    if (*stream == NULL) *stream = o->stream;
    int* seen = o->is_send ? seen_send : seen_recv;
    if (seen[o->peer]++ != j) continue;
    if (o->is_send) {
      if (p->src == NULL) p->src = o->buf;
      p->send_off[o->peer] = (uint64_t)((uintptr_t)o->buf - (uintptr_t)p->src), p->send_len[o->peer] = o->bytes;
    } else {
      if (p->dst == NULL) p->dst = o->buf;
      p->recv_off[o->peer] = (uint64_t)((uintptr_t)o->buf - (uintptr_t)p->dst), p->recv_len[o->peer] = o->bytes;
    }
    any = 1;
  }
  for (int q = 0; q < ac->nranks; q++) {
    p->pair_len[q] = p->send_len[q] > p->recv_len[q] ? p->send_len[q] : p->recv_len[q];
    if (p->pair_len[q] > p->maxlen) p->maxlen = p->pair_len[q];
  }
  return any;
}

/* A send to this rank itself meets the receive from itself: both must be in the same launch,
 * and the kernel copies src to dst for them (GX_COPY's own part). */
static mscclppResult_t run_comm(struct p2p_op* ops, int nops, struct algo_comm* ac) {
  struct gpu_net* g = NULL;
  void* stream = NULL;
  struct gx_plan p;
  for (int j = 0; plan_launch(ops, nops, ac, j, &p, &stream); j++) {
    if (g == NULL) MPP_CHECK(gpu_net_get(ac, stream, &g));
    int me = ac->rank;
    if (p.send_len[me] != p.recv_len[me])
      return MPP_ERR(mscclppInvalidUsage, "send/recv: rank %d sends %llu bytes to itself but receives %llu (op %d)", me,
                     (unsigned long long)p.send_len[me], (unsigned long long)p.recv_len[me], j);
    MPP_CHECK(gpu_launch_bulk(&g->d, &p, stream));
  }
  return mscclppSuccess;
}

mscclppResult_t gpu_p2p_run(struct p2p_op* ops, int nops) {
  for (int i = 0; i < nops; i++) {
    if (ops[i].ac->kind != mscclppRankGpu)
      return MPP_ERR(mscclppInvalidUsage, "send/recv: a group mixes GPU-rank and CPU-rank communicators");
    if (ops[i].ac->nhosts == 1 && ops[i].ac->nranks > GPU_MAX_RANKS)
      return MPP_ERR(mscclppInvalidUsage, "send/recv: %d ranks; GPU ranks support at most %d", ops[i].ac->nranks,
                     GPU_MAX_RANKS);
  }
  for (int i = 0; i < nops; i++) {
    int first = 1;
    for (int k = 0; k < i && first; k++) first = ops[k].ac != ops[i].ac;
    if (first && ops[i].ac->nhosts > 1) MPP_CHECK(xh_p2p_comm(ops, nops, ops[i].ac));
    else if (first) MPP_CHECK(run_comm(ops, nops, ops[i].ac));
  }
  return mscclppSuccess;
}
