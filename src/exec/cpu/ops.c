/* ops.c - the data ops of the CPU executor: put/get/copy (with their signals and flushes), the
 * reductions re/res/rre/rres, and the dispatch to sync, packet and switch ops. */
#include <string.h>

#include "elem/reduce.h"
#include "exec/cpu/block.h"

/* put/get/copy: one source to every destination, or source i to destination i. A source on
 * another host is read a tile at a time; a destination there is written over tcp. */
static int move(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n) {
  const struct plan_ref* r = &k->bl->refs[op->first_ref];
  for (uint16_t d = 0; d < op->ndst; d++) {
    const struct plan_ref* src = &r[op->nsrc == op->ndst ? d : 0];
    const char* p = blk_ptr(k, src, s, 0);
    if (p) {
      if (blk_write(k, &r[op->nsrc + d], s, 0, p, n)) return -1;
      continue;
    }
    for (uint64_t t = 0; t < n; t += EXEC_RTILE) {
      uint64_t m = n - t < EXEC_RTILE ? n - t : EXEC_RTILE;
      const char* tile = blk_source(k, src, s + t, m, blk_rtile(k, 0));
      if (!tile || blk_write(k, &r[op->nsrc + d], s + t, 0, tile, m)) return -1;
    }
  }
  return 0;
}

/* reduce over one range [s, s+n) with some reference on another host: each source read (if
 * there) into its tile, the result made in place (dst[0] mapped) or in a tile, then written to
 * every destination that is not where it was made. */
static int reduce_remote(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n) {
  const struct exec_call* c = k->c;
  const struct plan_ref* r = &k->bl->refs[op->first_ref];
  const void** srcs = (const void**)(k->temp + (size_t)EXEC_TILE * (c->ps->maxrefs + 1));
  for (uint16_t i = 0; i < op->nsrc; i++)
    if (!(srcs[i] = blk_source(k, &r[i], s, n, blk_rtile(k, i)))) return -1;
  char* out = blk_ptr(k, &r[op->nsrc], s, 0);
  char* made = out ? out : blk_rtile(k, op->nsrc);
  elem_reduce(made, srcs, op->nsrc, n / c->esize, c->dtype, (enum elem_op)op->redop, 1, NULL);
  for (uint16_t d = out ? 1 : 0; d < op->ndst; d++)
    if (blk_write(k, &r[op->nsrc + d], s, 0, made, n)) return -1;
  return 0;
}

/* dst[0] = reduce(srcs) over [s, s+n); then dst[0] is copied to the other destinations. */
static int reduce(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n) {
  const struct exec_call* c = k->c;
  const struct plan_ref* r = &k->bl->refs[op->first_ref];
  if (n % c->esize)
    return blk_fail(k, mscclppInvalidUsage, "reduces %llu bytes, not a whole number of %zu-byte elements",
                    (unsigned long long)n, c->esize);
  if (blk_op_remote(k, op)) { /* EXEC_RTILE is a whole number of elements of every type */
    for (uint64_t t = 0; t < n; t += EXEC_RTILE)
      if (reduce_remote(k, op, s + t, n - t < EXEC_RTILE ? n - t : EXEC_RTILE)) return -1;
    return 0;
  }
  const void** srcs = (const void**)(k->temp + (size_t)EXEC_TILE * (c->ps->maxrefs + 1));
  for (uint16_t i = 0; i < op->nsrc; i++) srcs[i] = blk_ptr(k, &r[i], s, 0);
  char* dst = blk_ptr(k, &r[op->nsrc], s, 0);
  elem_reduce(dst, srcs, op->nsrc, n / c->esize, c->dtype, (enum elem_op)op->redop, 1, NULL);
  for (uint16_t d = 1; d < op->ndst; d++) memcpy(blk_ptr(k, &r[op->nsrc + d], s, 0), dst, n);
  return 0;
}

/* Every op code has its case (-Wswitch-enum), each returning; a code no case takes (a corrupted
 * op) falls out of the switch and fails naming it. */
int exec_op(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n) {
  switch ((enum plan_op_code)op->code) {
    case PLAN_OP_NOP:
    case PLAN_OP_PIPELINE:
      return 0;
    case PLAN_OP_BARRIER:
      return exec_barrier(k, op);
    case PLAN_OP_SEM_ACQUIRE:
    case PLAN_OP_SEM_RELEASE:
      return exec_sem(k, op);
    case PLAN_OP_SIGNAL:
      return exec_signal(k, op, 0);
    case PLAN_OP_RLXSIGNAL:
      return exec_signal(k, op, 1);
    case PLAN_OP_WAIT:
    case PLAN_OP_RLXWAIT:
      return exec_wait(k, op);
    case PLAN_OP_FLUSH:
      return exec_flush(k, op);
    case PLAN_OP_PUT:
    case PLAN_OP_GET:
    case PLAN_OP_COPY:
      return move(k, op, s, n);
    case PLAN_OP_PWS:
      return move(k, op, s, n) ? -1 : exec_signal(k, op, 0);
    case PLAN_OP_PWSF:
      return move(k, op, s, n) || exec_flush(k, op) ? -1 : exec_signal(k, op, 0);
    case PLAN_OP_RE:
    case PLAN_OP_RES:
    case PLAN_OP_RRE:
    case PLAN_OP_RRES:
      return reduce(k, op, s, n);
    case PLAN_OP_CPKT:
    case PLAN_OP_PPKT:
      return exec_pkt_copy(k, op, s, n);
    case PLAN_OP_UPKT:
      return exec_pkt_unpack(k, op, s, n);
    case PLAN_OP_RPPKT:
      return exec_pkt_forward(k, op, s, n);
    case PLAN_OP_REPKT:
    case PLAN_OP_RESPKT:
    case PLAN_OP_RECPKT:
    case PLAN_OP_RECSPKT:
      return exec_pkt_reduce(k, op, s, n);
    case PLAN_OP_GSTORE:
    case PLAN_OP_GSTOREPKT:
      return exec_switch_store(k, op, s, n);
    case PLAN_OP_GLRE:
    case PLAN_OP_GLRES:
      return exec_switch_reduce(k, op, s, n);
  }
  return blk_fail(k, mscclppInternalError, "op code %u is not a plan op this executor knows", (unsigned)op->code);
}
