/* supports.c - whether the executor runs a plan on a communicator: its rank kind, and for GPU ranks
 * on several hosts, whether every op of the plan reaches the other hosts through port channels. */
#include "exec/supports.h"

#include <stdio.h>

#include "core/comm.h"
#include "plan/plan.h"
#include "transport/transport.h"

#if MSCCLPP_HAVE_CUDA
#define EXEC_GPU_RANKS 1
#else
#define EXEC_GPU_RANKS 0
#endif

int exec_supports_kind(const struct mscclppComm* comm) {
  return comm->kind == mscclppRankCpu || (comm->kind == mscclppRankGpu && EXEC_GPU_RANKS);
}

static int one_host(const struct mscclppComm* comm) {
  for (int r = 0; r < comm->nranks; r++)
    if (!transport_same_host(&comm->tc, r)) return 0;
  return 1;
}

static int apart(const struct mscclppComm* comm, int a, int b) {
  return comm->tc.peers[a].host_hash != comm->tc.peers[b].host_hash;
}

/* Ops whose remote destinations the GPU executor sends through the proxy when the channel is a
 * port channel (route.c); every other remote reference is a load or store through mapped memory. */
static int port_put(const struct plan_op* op) {
  return op->chan_type == PLAN_CH_PORT && (op->code == PLAN_OP_PUT || op->code == PLAN_OP_PWS || op->code == PLAN_OP_PWSF ||
                                           op->code == PLAN_OP_RES || op->code == PLAN_OP_RRES || op->code == PLAN_OP_RPPKT);
}

/* Why op i of rank r's block b would need memory of another host; 0 when it does not. */
static int op_unfit(const struct mscclppComm* comm, const struct mscclppPlan* plan, int r, int b, uint32_t i,
                    char* why, size_t len) {
  const struct plan_block* bl = &plan->ranks[r].blocks[b];
  const struct plan_op* op = &bl->ops[i];
  for (int c = 0; c < op->nchan; c++) {
    int peer = bl->chans[op->first_chan + c].peer;
    if (op->chan_type == PLAN_CH_MEMORY && peer >= 0 && peer < comm->nranks && apart(comm, r, peer))
      return snprintf(why, len, "gpu %d threadblock %d op %u (%s) uses a memory channel to rank %d, which is on another "
                      "host (across hosts only port channels)", r, b, i, plan_op_name(op->code), peer) > 0;
  }
  for (int k = 0; k < op->nsrc + op->ndst; k++) {
    const struct plan_ref* ref = &bl->refs[op->first_ref + k];
    if (ref->kind != PLAN_REF_REMOTE || ref->rank < 0 || ref->rank >= comm->nranks || !apart(comm, r, ref->rank)) continue;
    if (k >= op->nsrc && port_put(op)) continue;
    return snprintf(why, len, "gpu %d threadblock %d op %u (%s) %s rank %d's %s, which is on another host (across hosts "
                    "only port puts: put, put_with_signal(_and_flush), ppkt, and the remote outputs of res/rres)", r, b,
                    i, plan_op_name(op->code), k < op->nsrc ? "reads" : "writes", ref->rank,
                    ref->btype == PLAN_BUF_SCR ? "scratch" : ref->btype == PLAN_BUF_IN ? "input" : "output") > 0;
  }
  return 0;
}

/* Why rank r's part of plan needs memory of another host (channels, switch groups, ops). */
static int rank_unfit(const struct mscclppComm* comm, const struct mscclppPlan* plan, int r, char* why, size_t len) {
  const struct plan_rank* pr = &plan->ranks[r];
  for (int q = 0; q < comm->nranks; q++)
    if (pr->pair_count[q * 4 + PLAN_CH_MEMORY] > 0 && apart(comm, r, q))
      return snprintf(why, len, "gpu %d has a memory channel to gpu %d, which is on another host (across hosts only port "
                      "channels)", r, q) > 0;
  for (int s = 0; s < pr->nswitch; s++)
    for (int m = 0; m < pr->sw[s].nranks; m++)
      if (apart(comm, r, pr->sw[s].ranks[m]))
        return snprintf(why, len, "gpu %d's switch channel %d spans hosts (rank %d is on another host)", r, s,
                        pr->sw[s].ranks[m]) > 0;
  for (int b = 0; b < pr->nblocks; b++)
    for (uint32_t i = 0; i < pr->blocks[b].nops; i++)
      if (op_unfit(comm, plan, r, b, i, why, len)) return 1;
  return 0;
}

int exec_plan_unfit(const struct mscclppComm* comm, const struct mscclppPlan* plan, char* why, size_t len) {
  if (comm->kind != mscclppRankGpu || one_host(comm) || plan->nranks != comm->nranks) return 0;
  for (int r = 0; r < plan->nranks; r++)
    if (rank_unfit(comm, plan, r, why, len)) return 1;
  return 0;
}
