/* check_sync.c - per-rank synchronization checks: every barrier id is met by exactly the number of
 * blocks its ops name, each the same number of times; semaphores are not acquired more often than
 * their initial value plus their releases allow (such a plan would wait forever). */
#include <stdlib.h>

#include "plan/lower.h"

/* uses[id * nblocks + b]: how often block b meets barrier id. */
static mscclppResult_t check_barriers(struct pj_where* w, struct plan_rank* pr, int maxid) {
  int n = pr->nblocks;
  int* uses = calloc((size_t)(maxid + 1) * (size_t)(n ? n : 1), sizeof(int));
  pr->barrier_blocks = calloc((size_t)maxid + 2, sizeof(int));
  if (!uses || !pr->barrier_blocks) {
    free(uses);
    return MPP_ERR(mscclppSystemError, "plan: out of memory");
  }
  pr->nbarriers = maxid + 1;
  mscclppResult_t res = mscclppSuccess;
  for (int b = 0; b < n && res == mscclppSuccess; b++)
    for (uint32_t i = 0; i < pr->blocks[b].nops; i++) {
      const struct plan_op* op = &pr->blocks[b].ops[i];
      if (op->code != PLAN_OP_BARRIER) continue;
      int* want = &pr->barrier_blocks[op->barrier_id];
      if (*want && *want != op->barrier_blocks) {
        w->tb = b, w->op = (int)i;
        res = pj_fail(w, "num_threadblocks", "barrier %d is given %d blocks here and %d elsewhere", op->barrier_id,
                      op->barrier_blocks, *want);
        break;
      }
      *want = op->barrier_blocks;
      uses[op->barrier_id * n + b]++;
    }
  for (int id = 0; id <= maxid && res == mscclppSuccess; id++) {
    int blocks = 0, times = 0;
    for (int b = 0; b < n; b++) {
      int u = uses[id * n + b];
      if (!u) continue;
      if (times && u != times) {
        w->tb = b;
        res = pj_fail(w, "barrier_id", "barrier %d is met %d times by this block and %d times by another", id, u, times);
        break;
      }
      times = u, blocks++;
    }
    if (res == mscclppSuccess && times && blocks != pr->barrier_blocks[id])
      res = pj_fail(w, "num_threadblocks", "barrier %d names %d blocks but %d blocks use it", id,
                    pr->barrier_blocks[id], blocks);
  }
  w->tb = -1, w->op = -1;
  free(uses);
  return res;
}

static mscclppResult_t check_sems(struct pj_where* w, const struct plan_rank* pr) {
  if (!pr->nsems) return mscclppSuccess;
  int64_t* bal = calloc((size_t)pr->nsems, sizeof(int64_t));
  if (!bal) return MPP_ERR(mscclppSystemError, "plan: out of memory");
  for (int s = 0; s < pr->nsems; s++) bal[s] = pr->sem_init[s];
  for (int b = 0; b < pr->nblocks; b++)
    for (uint32_t i = 0; i < pr->blocks[b].nops; i++) {
      const struct plan_op* op = &pr->blocks[b].ops[i];
      if (op->code != PLAN_OP_SEM_ACQUIRE && op->code != PLAN_OP_SEM_RELEASE) continue;
      for (uint16_t k = 0; k < op->nchan; k++)
        bal[pr->blocks[b].chans[op->first_chan + k].ord] += op->code == PLAN_OP_SEM_RELEASE ? 1 : -1;
    }
  mscclppResult_t res = mscclppSuccess;
  for (int s = 0; s < pr->nsems && res == mscclppSuccess; s++)
    if (bal[s] < 0)
      res = pj_fail(w, "semaphore_ids", "semaphore %d is acquired %lld times more than its init_value and releases allow",
                    s, (long long)-bal[s]);
  free(bal);
  return res;
}

mscclppResult_t check_sync(struct mscclppPlan* p, struct pj_where* w, struct plan_rank* pr) {
  (void)p;
  int maxid = -1;
  for (int b = 0; b < pr->nblocks; b++)
    for (uint32_t i = 0; i < pr->blocks[b].nops; i++)
      if (pr->blocks[b].ops[i].code == PLAN_OP_BARRIER && pr->blocks[b].ops[i].barrier_id > maxid)
        maxid = pr->blocks[b].ops[i].barrier_id;
  if (maxid >= 0) MPP_CHECK(check_barriers(w, pr, maxid));
  return check_sems(w, pr);
}
