/* check_sync.c - per-rank synchronization checks: every barrier id is met by exactly the number of
 * blocks its ops name, each the same number of times; semaphores are not acquired more often than
 * their initial value plus their releases allow (such a plan would wait forever). */
#include <stdlib.h>

#include "plan/load/lower.h"

/* How often one block meets a barrier id, and how many blocks meet it (check_barriers). */
struct bar_use {
  int times, blocks;
};

/* Every barrier op of a rank names the same num_threadblocks for its id; fills pr->barrier_blocks. */
static mscclppResult_t barrier_sizes(struct pj_where* w, struct plan_rank* pr) {
  for (int b = 0; b < pr->nblocks; b++)
    for (uint32_t i = 0; i < pr->blocks[b].nops; i++) {
      const struct plan_op* op = &pr->blocks[b].ops[i];
      if (op->code != PLAN_OP_BARRIER) continue;
      int* want = &pr->barrier_blocks[op->barrier_id];
      if (*want && *want != op->barrier_blocks) {
        w->tb = b, w->op = (int)i;
        return pj_fail(w, "num_threadblocks", "barrier %d is given %d blocks here and %d elsewhere", op->barrier_id,
                       op->barrier_blocks, *want);
      }
      *want = op->barrier_blocks;
    }
  return mscclppSuccess;
}

/* Counts block b's meetings of each barrier id in count[] (all zero before and after) and folds
 * them into use[]: a block meeting an id a different number of times than an earlier one fails. */
static mscclppResult_t barrier_block(struct pj_where* w, const struct plan_block* bl, int b, int* count,
                                     struct bar_use* use) {
  mscclppResult_t res = mscclppSuccess;
  for (uint32_t i = 0; i < bl->nops; i++)
    if (bl->ops[i].code == PLAN_OP_BARRIER) count[bl->ops[i].barrier_id]++;
  for (uint32_t i = 0; i < bl->nops; i++) {
    int id = bl->ops[i].barrier_id, u = bl->ops[i].code == PLAN_OP_BARRIER ? count[id] : 0;
    if (!u) continue; /* not a barrier, or its id is folded already */
    count[id] = 0;
    if (res == mscclppSuccess && use[id].times && u != use[id].times) {
      w->tb = b;
      res = pj_fail(w, "barrier_id", "barrier %d is met %d times by this block and %d times by another", id, u,
                    use[id].times);
    }
    use[id].times = u, use[id].blocks++;
  }
  return res;
}

/* Barrier ids 0..maxid of one rank: one num_threadblocks per id, met by exactly that many blocks,
 * each the same number of times. Memory in maxid + 1, not in ids x blocks. */
static mscclppResult_t check_barriers(struct pj_where* w, struct plan_rank* pr, int maxid) {
  int* count = calloc((size_t)maxid + 1, sizeof(int));
  struct bar_use* use = calloc((size_t)maxid + 1, sizeof(*use));
  pr->barrier_blocks = calloc((size_t)maxid + 2, sizeof(int));
  mscclppResult_t res = mscclppSuccess;
  if (!count || !use || !pr->barrier_blocks) res = MPP_ERR(mscclppSystemError, "plan: out of memory");
  pr->nbarriers = maxid + 1;
  if (res == mscclppSuccess) res = barrier_sizes(w, pr);
  for (int b = 0; b < pr->nblocks && res == mscclppSuccess; b++) res = barrier_block(w, &pr->blocks[b], b, count, use);
  for (int id = 0; id <= maxid && res == mscclppSuccess; id++)
    if (use[id].times && use[id].blocks != pr->barrier_blocks[id])
      res = pj_fail(w, "num_threadblocks", "barrier %d names %d blocks but %d blocks use it", id,
                    pr->barrier_blocks[id], use[id].blocks);
  w->tb = -1, w->op = -1;
  free(count), free(use);
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
