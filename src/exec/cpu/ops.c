/* ops.c - the data ops of the CPU executor: put/get/copy (with their signals and flushes), the
 * reductions re/res/rre/rres, and the dispatch to sync, packet and switch ops. */
#include <string.h>

#include "algo/reduce.h"
#include "exec/cpu/block.h"

/* put/get/copy: one source to every destination, or source i to destination i. */
static void move(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n) {
  const struct plan_ref* r = &k->bl->refs[op->first_ref];
  for (uint16_t d = 0; d < op->ndst; d++) {
    const struct plan_ref* src = &r[op->nsrc == op->ndst ? d : 0];
    memmove(blk_ptr(k, &r[op->nsrc + d], s, 0), blk_ptr(k, src, s, 0), n);
  }
}

/* dst[0] = reduce(srcs) over [s, s+n); then dst[0] is copied to the other destinations. */
static int reduce(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n) {
  const struct exec_call* c = k->c;
  const struct plan_ref* r = &k->bl->refs[op->first_ref];
  if (n % c->esize)
    return blk_fail(k, mscclppInvalidUsage, "reduces %llu bytes, not a whole number of %zu-byte elements",
                    (unsigned long long)n, c->esize);
  const void** srcs = (const void**)(k->temp + (size_t)EXEC_TILE * (c->ps->maxrefs + 1));
  for (uint16_t i = 0; i < op->nsrc; i++) srcs[i] = blk_ptr(k, &r[i], s, 0);
  char* dst = blk_ptr(k, &r[op->nsrc], s, 0);
  algo_reduce(dst, srcs, op->nsrc, n / c->esize, c->dtype, (enum algo_op)op->redop, 1, NULL);
  for (uint16_t d = 1; d < op->ndst; d++) memcpy(blk_ptr(k, &r[op->nsrc + d], s, 0), dst, n);
  return 0;
}

int exec_op(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n) {
  switch (op->code) {
    case PLAN_OP_NOP:
    case PLAN_OP_PIPELINE:
      return 0;
    case PLAN_OP_BARRIER:
      return exec_barrier(k, op);
    case PLAN_OP_SEM_ACQUIRE:
    case PLAN_OP_SEM_RELEASE:
      return exec_sem(k, op);
    case PLAN_OP_SIGNAL:
    case PLAN_OP_RLXSIGNAL:
      return exec_signal(k, op, op->code == PLAN_OP_RLXSIGNAL);
    case PLAN_OP_WAIT:
    case PLAN_OP_RLXWAIT:
      return exec_wait(k, op);
    case PLAN_OP_FLUSH: /* stores into mapped memory are complete when issued; order them */
      mscclppFenceSys();
      return 0;
    case PLAN_OP_PUT:
    case PLAN_OP_GET:
    case PLAN_OP_COPY:
      move(k, op, s, n);
      return 0;
    case PLAN_OP_PWS:
    case PLAN_OP_PWSF:
      move(k, op, s, n);
      if (op->code == PLAN_OP_PWSF) mscclppFenceSys();
      return exec_signal(k, op, 0);
    case PLAN_OP_RE:
    case PLAN_OP_RES:
    case PLAN_OP_RRE:
    case PLAN_OP_RRES:
      return reduce(k, op, s, n);
    case PLAN_OP_GLRE:
    case PLAN_OP_GLRES:
    case PLAN_OP_GSTORE:
    case PLAN_OP_GSTOREPKT:
      return exec_switch_op(k, op, s, n);
    default:
      return exec_pkt_op(k, op, s, n);
  }
}
