/* run.c - one call of a plan on a CPU rank: mirrors in, rank barrier, blocks on the pool, rank
 * barrier, output mirror back (cpu.h explains why). */
#include <string.h>

#include "elem/redop.h"
#include "exec/cpu/block.h"

#define EXEC_ALIGN(x, a) (((x) + (a) - 1) / (a) * (a))

/* Offsets of the input and output mirrors in the data region: overlapping user ranges share one
 * mirror at their relative offset; the mirror area is sized for the worst case so every rank
 * sizes its region alike. */
static void mirror_offsets(const char* send, const char* recv, uint64_t sb, uint64_t rb, uint64_t* in_off,
                           uint64_t* out_off) {
  if (sb && rb && send < recv + rb && recv < send + sb) {
    const char* lo = send < recv ? send : recv;
    *in_off = (uint64_t)(send - lo), *out_off = (uint64_t)(recv - lo);
  } else {
    *in_off = 0, *out_off = EXEC_ALIGN(sb, 64);
  }
}

static void copy_in(struct exec_cpu* st, const char* send, char* recv, uint64_t sb, uint64_t rb, uint64_t in_off,
                    uint64_t out_off) {
  if (rb) memcpy(st->data + out_off, recv, rb); /* what the plan leaves alone comes back unchanged */
  if (sb) memmove(st->data + in_off, send, sb);
}

static mscclppResult_t collect(struct exec_call* c) {
  int n = c->pr->nblocks;
  for (int b = 0; b < n; b++)
    if (c->rcs[b]) return MPP_ERR((mscclppResult_t)c->rcs[b], "%s", c->errs + (size_t)b * EXEC_ERR_LEN);
  return mscclppSuccess;
}

static mscclppResult_t prepare(struct exec_call* c, struct mscclppPlan* plan, uint64_t sb, uint64_t rb) {
  struct exec_cpu* st = c->st;
  if (plan->nranks != st->nranks)
    return MPP_ERR(mscclppInvalidUsage, "%s: a plan for %d ranks on a communicator of %d", plan->file, plan->nranks, st->nranks);
  MPP_CHECK(plan_layout_get(plan, sb, rb, &c->layout));
  uint64_t scr_off = EXEC_ALIGN(EXEC_ALIGN(sb, 64) + EXEC_ALIGN(rb, 64), 4096);
  MPP_CHECK(exec_cpu_data(st, scr_off + c->layout.scr_bytes + 64));
  MPP_CHECK(exec_cpu_plan_state(st, plan, &c->ps));
  c->errs = c->ps->errs, c->rcs = c->ps->rcs;
  memset(c->rcs, 0, sizeof(int) * (size_t)c->pr->nblocks);
  for (int i = 0; i < c->pr->nsems; i++) c->ps->sems[i] = c->pr->sem_init[i];
  exec_slot(st->sync, st->rank)->scr_off = scr_off;
  return mscclppSuccess;
}

mscclppResult_t exec_cpu_run(struct mscclppComm* comm, struct mscclppPlan* plan, const void* send, void* recv,
                             uint64_t sb, uint64_t rb, int dtype) {
  struct exec_cpu* st;
  MPP_CHECK(exec_cpu_get(comm, &st));
  struct exec_call c = {.st = st, .plan = plan, .dtype = dtype, .esize = elem_dtype_size(dtype)};
  if (!c.esize) return MPP_ERR(mscclppInvalidArgument, "executor: unknown datatype %d", dtype);
  c.pr = &plan->ranks[st->rank < plan->nranks ? st->rank : 0];
  MPP_CHECK(prepare(&c, plan, sb, rb));
  struct exec_sync_slot* h = exec_slot(st->sync, st->rank);
  mirror_offsets(send, recv, sb, rb, &h->in_off, &h->out_off);
  copy_in(st, send, recv, sb, rb, h->in_off, h->out_off);
  st->launches++;
  c.flag = (uint32_t)st->launches ? (uint32_t)st->launches : 1;
  c.scr_half = plan->double_scratch ? (st->launches & 1) * c.layout.scr_stride : 0;
  MPP_CHECK(exec_rank_barrier(st, 1)); /* every mirror is filled and every offset published */
  for (int r = 0; r < st->nranks; r++) {
    const struct exec_sync_slot* ph = exec_slot(st->sync, r); /* rank r's offsets, as it published them here */
    st->peer_off[r * 3 + PLAN_BUF_IN] = ph->in_off;
    st->peer_off[r * 3 + PLAN_BUF_OUT] = ph->out_off;
    st->peer_off[r * 3 + PLAN_BUF_SCR] = ph->scr_off;
  }
  MPP_CHECK(exec_pool_run(&st->pool, c.pr->nblocks, exec_block, &c));
  MPP_CHECK(collect(&c));
  MPP_CHECK(exec_rank_barrier(st, 0)); /* every peer's writes into our output mirror are done */
  if (rb) memcpy(recv, st->data + h->out_off, rb);
  return mscclppSuccess;
}
