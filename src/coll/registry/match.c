/* match.c - which registered plans serve a collective call, and which of them runs.
 *
 * Plan rule (JSON plans): collective, nranks == world size, inplace == the call's in-place-ness,
 * ranks per node (when the registration names one), min_message_size <= bytes <= max_message_size,
 * and for allreduce/reducescatter a call operator of sum, prod, max or min that every reduce op of
 * the plan uses (a plan without reduce ops serves any of them). Broadcast: the registration's root
 * == the call's root, and the call counts as out of place (only the root knows whether it is in
 * place, and every rank must choose alike).
 * MSCCL rule (XML algorithms): MSCCL's own (xml_serves), plus the same broadcast conventions. */
#include <string.h>

#include "coll/registry/registry.h"
#include "util/err.h"

static int reduces(int coll) { return coll == ALGO_COLL_ALLREDUCE || coll == ALGO_COLL_REDUCESCATTER; }

static int plan_rule(const struct planreg_entry* e, const struct planreg_query* q, int inplace) {
  if (e->nranks != q->nranks || e->inplace != inplace) return 0;
  if (e->rpn != 0 && e->rpn != q->rpn) return 0;
  if (q->bytes < e->min_bytes || q->bytes > e->max_bytes) return 0;
  return !reduces(q->coll) || e->redops == 0 || e->redops == (1u << q->op);
}

static int msccl_rule(const struct planreg_entry* e, const struct planreg_query* q, int inplace) {
  static const char* const ops[PLANREG_NOPS] = {"sum", "prod", "max", "min"};
  struct xml_query x = {algo_coll_name((enum algo_coll)q->coll), q->count, q->es, q->nranks, inplace,
                        reduces(q->coll) ? ops[q->op] : NULL};
  return xml_serves(&e->xml, &x);
}

int planreg_serves(const struct planreg_entry* e, const struct planreg_query* q) {
  if (e->coll < 0 || e->coll != q->coll) return 0;
  if (reduces(q->coll) && (q->op < 0 || q->op >= PLANREG_NOPS)) return 0; /* avg, premulsum: no plan form */
  if (q->coll == ALGO_COLL_BROADCAST && e->root != q->root) return 0;
  int inplace = q->coll == ALGO_COLL_BROADCAST ? 0 : (q->inplace != 0);
  return e->rule == PLANREG_RULE_MSCCL ? msccl_rule(e, q, inplace) : plan_rule(e, q, inplace);
}

mscclppPlan_t planreg_plan_for(const struct planreg_entry* e, const struct planreg_query* q) {
  if (e->rule == PLANREG_RULE_MSCCL && reduces(q->coll) && q->op >= 0 && q->op < PLANREG_NOPS && e->plan[q->op])
    return e->plan[q->op];
  return e->plan[0];
}

static void public_query(const struct planreg_query* q, mscclppPlanQuery_t* pq) {
  memset(pq, 0, sizeof(*pq));
  pq->collective = algo_coll_name((enum algo_coll)q->coll);
  pq->count = q->count, pq->bytes = q->bytes, pq->datatype = (mscclppDataType_t)q->dtype;
  pq->op = q->user_op, pq->root = q->root;
  pq->worldSize = q->nranks, pq->ranksPerNode = q->rpn, pq->rank = q->rank, pq->inplace = q->inplace;
}

/* The selector's answer for candidates c[0..k): the index to run, or -1 for the built-ins. */
static mscclppResult_t ask(const struct planreg_query* q, const mscclppPlanCandidate_t* c, int k,
                           mscclppPlanSelector_t selector, void* user, int* pick) {
  mscclppPlanQuery_t pq;
  public_query(q, &pq);
  int v = selector(&pq, c, k, user);
  if (v >= 0 && v < k) *pick = v;
  else if (v == MSCCLPP_PLAN_SELECT_DEFAULT) *pick = 0;
  else if (v == MSCCLPP_PLAN_SELECT_BUILTIN) *pick = -1;
  else
    return MPP_ERR(mscclppInvalidUsage,
                   "%s of %zu bytes: the plan selector returned %d; expected a candidate index 0..%d, "
                   "MSCCLPP_PLAN_SELECT_DEFAULT (-1) or MSCCLPP_PLAN_SELECT_BUILTIN (-2)",
                   pq.collective, q->bytes, v, k - 1);
  return mscclppSuccess;
}

mscclppResult_t planreg_pick(struct planreg_entry* const* e, int n, const struct planreg_query* q,
                             mscclppPlanSelector_t selector, void* user, struct planreg_entry** out) {
  *out = NULL;
  if (selector == NULL) {
    for (int i = 0; i < n && *out == NULL; i++)
      if (planreg_serves(e[i], q)) *out = e[i];
    return mscclppSuccess;
  }
  mscclppPlanCandidate_t c[PLANREG_MAX];
  int idx[PLANREG_MAX], k = 0;
  for (int i = 0; i < n && k < PLANREG_MAX; i++) {
    if (!planreg_serves(e[i], q)) continue;
    c[k] = (mscclppPlanCandidate_t){planreg_plan_for(e[i], q), e[i]->id, e[i]->priority, e[i]->rule == PLANREG_RULE_MSCCL};
    idx[k++] = i;
  }
  if (k == 0) return mscclppSuccess;
  int pick = -1;
  MPP_CHECK(ask(q, c, k, selector, user, &pick));
  if (pick >= 0) *out = e[idx[pick]];
  return mscclppSuccess;
}
