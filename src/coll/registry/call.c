/* call.c - the hook the collectives' dispatch point (coll/dispatch.c) calls before the
 * built-in algorithms: the call as the registry's rules see it, the pick, and the run through
 * mscclppExecutePlan with the collective's buffer shapes.
 *
 * Cost when no plan is registered for the collective: two atomic loads. Otherwise a walk over the
 * collective's entries; no allocation, lock or system call (the environment is read once, at the
 * first collective of the process). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/comm.h"
#include "exec/supports.h"
#include "coll/registry/registry.h"
#include "util/err.h"
#include "util/log.h"

/* Ranks on rank 0's host: the same number on every rank (each host's count when all hosts have
 * as many ranks). Cached per thread for the last communicator asked about. */
static int ranks_per_node(const struct mscclppComm* c) {
  static _Thread_local const struct mscclppComm* last;
  static _Thread_local uint64_t last_id;
  static _Thread_local int last_rpn;
  if (c == last && c->comm_id == last_id) return last_rpn;
  int n = 0;
  for (int r = 0; r < c->nranks; r++) n += c->peers[r].host_hash == c->peers[0].host_hash;
  last = c, last_id = c->comm_id, last_rpn = n;
  return n;
}

/* NCCL's in-place forms (collectives.h). */
static int is_inplace(const struct algo_args* a, int rank) {
  uintptr_t s = (uintptr_t)a->send, r = (uintptr_t)a->recv, block = (uintptr_t)(a->count * a->es);
  if (s == 0 || r == 0) return 0;
  if (a->coll == ALGO_COLL_ALLGATHER) return s == r + (uintptr_t)rank * block;
  if (a->coll == ALGO_COLL_REDUCESCATTER) return r == s + (uintptr_t)rank * block;
  return s == r;
}

static void make_query(const struct algo_comm* ac, const struct algo_args* a, struct planreg_query* q) {
  int red = algo_coll_reduces(a->coll);
  memset(q, 0, sizeof(*q));
  q->coll = (int)a->coll;
  q->count = a->count, q->es = a->es, q->bytes = a->bytes, q->dtype = a->dtype;
  q->op = red ? (int)a->op : -1;
  q->user_op = red ? (int)a->user_op : -1;
  q->root = algo_coll_rooted(a->coll) ? a->root : -1;
  q->nranks = ac->nranks, q->rank = ac->rank, q->rpn = ranks_per_node(ac->comm);
  q->inplace = a->coll == ALGO_COLL_BROADCAST ? 0 : is_inplace(a, ac->rank); /* only the root could tell */
}

/* Runs plan for the call: input and output bytes by the collective's shape. A broadcast's
 * non-roots pass no input; their output stands in for it (a broadcast plan reads only the root's). */
static mscclppResult_t run(struct mscclppComm* comm, mscclppPlan_t plan, const struct algo_args* a) {
  size_t block = a->count * a->es, all = block * (size_t)comm->nranks;
  size_t sb = block, rb = block;
  const void* send = a->send;
  if (a->coll == ALGO_COLL_ALLGATHER) rb = all;
  if (a->coll == ALGO_COLL_REDUCESCATTER) sb = all;
  if (a->coll == ALGO_COLL_ALLTOALL) sb = rb = all;
  if (a->coll == ALGO_COLL_BROADCAST && send == NULL) send = a->recv;
  return exec_plan(comm, plan, send, a->recv, sb, rb, (mscclppDataType_t)a->dtype, mscclppPacketLL16, a->stream);
}

/* Puts the collective and the plan in front of the executor's message. */
static mscclppResult_t name_plan(mscclppResult_t res, const struct algo_args* a, const struct planreg_entry* e) {
  char msg[1024];
  snprintf(msg, sizeof(msg), "%s", err_last());
  return MPP_ERR(res, "%s of %zu bytes with registered plan %d (%s): %s", algo_coll_name(a->coll), a->bytes, e->id,
                 e->source, msg);
}

mscclppResult_t planreg_dispatch(struct algo_comm* ac, const struct algo_args* a, int* done) {
  *done = 0;
  MPP_CHECK(planreg_env_ensure());
  const struct planreg_snap* s = planreg_snapshot();
  if (s == NULL || (int)a->coll < 0 || a->coll >= ALGO_COLL_COUNT || s->count[a->coll] == 0) return mscclppSuccess;
  if (!exec_supports_kind(ac->comm)) return mscclppSuccess;
  struct planreg_query q;
  make_query(ac, a, &q);
  struct planreg_entry* e;
  MPP_CHECK(planreg_pick(s->e + s->start[a->coll], s->count[a->coll], &q, s->selector, s->user, &e));
  if (e == NULL) return mscclppSuccess;
  char why[400]; /* GPU ranks across hosts: a plan that would map another host's memory is left aside */
  if (exec_plan_unfit(ac->comm, planreg_plan_for(e, &q), why, sizeof(why))) {
    LOG_DEBUG_(LOG_SUB_EXEC, "%s of %zu bytes: registered plan %d (%s) left aside: %s", algo_coll_name(a->coll), a->bytes,
               e->id, e->source, why);
    return mscclppSuccess;
  }
  /* Relaxed: a statistic, read by mscclppPlanRegistryQuery. */
  atomic_fetch_add_explicit(&e->uses, 1, memory_order_relaxed);
  LOG_TRACE_(LOG_SUB_EXEC, "%s of %zu bytes on %d ranks: registered plan %d (%s)", algo_coll_name(a->coll), a->bytes,
             ac->nranks, e->id, e->source);
  *done = 1;
  mscclppResult_t res = run(ac->comm, planreg_plan_for(e, &q), a);
  return res == mscclppSuccess ? res : name_plan(res, a, e);
}
