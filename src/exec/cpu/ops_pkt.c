/* ops_pkt.c - LL16 packet ops (flag = the call's launch number) and switch-channel ops emulated
 * over the group's mapped memory. Packet reductions and switch reductions work in tiles of
 * EXEC_TILE bytes through the block's temp space, so no op allocates. */
#include <string.h>

#include "algo/reduce.h"
#include "exec/cpu/block.h"

void exec_put_pkts(struct blk* k, char* dst, const char* src, uint64_t n) {
  mscclppPutPacketsLL16((mscclppLL16Packet*)dst, src, n, k->c->flag, 0, 1);
}

int exec_get_pkts(struct blk* k, char* dst, const char* pkts, uint64_t n, int peer) {
  const mscclppLL16Packet* p = (const mscclppLL16Packet*)pkts;
  for (uint64_t i = 0; i * 8 < n; i++) {
    uint64_t payload = 0, t0 = 0;
    uint32_t spins = 0;
    while (!mscclppLL16Try(&p[i], k->c->flag, &payload)) {
      if (!t0) t0 = mscclppNowNs();
      if (blk_spin(k, &spins, t0, "packets", peer)) return -1;
    }
    mscclppStoreBytes(dst + i * 8, payload, n - i * 8 < 8 ? (uint32_t)(n - i * 8) : 8u);
  }
  return 0;
}

static const void** ptrs(struct blk* k) { return (const void**)(k->temp + (size_t)EXEC_TILE * (k->c->ps->maxrefs + 1)); }

/* repkt family over one tile [s, s+m): dst0 = reduce(src0 data, packet sources), then packets of
 * the result to dst[1..] (local or remote scratch). */
static int reduce_pkts_tile(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t m) {
  const struct plan_ref* r = &k->bl->refs[op->first_ref];
  const void** srcs = ptrs(k);
  srcs[0] = blk_ptr(k, &r[0], s, 0);
  for (uint16_t i = 1; i < op->nsrc; i++) {
    char* t = k->temp + (size_t)EXEC_TILE * i;
    if (exec_get_pkts(k, t, blk_ptr(k, &r[i], s, 1), m, -1)) return -1;
    srcs[i] = t;
  }
  char* dst = blk_ptr(k, &r[op->nsrc], s, 0);
  algo_reduce(dst, srcs, op->nsrc, m / k->c->esize, k->c->dtype, (enum algo_op)op->redop, 1, NULL);
  for (uint16_t d = 1; d < op->ndst; d++) exec_put_pkts(k, blk_ptr(k, &r[op->nsrc + d], s, 1), dst, m);
  return 0;
}

int exec_pkt_op(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n) {
  const struct plan_ref* r = &k->bl->refs[op->first_ref];
  switch (op->code) {
    case PLAN_OP_CPKT:
    case PLAN_OP_PPKT:
      for (uint16_t d = 0; d < op->ndst; d++) exec_put_pkts(k, blk_ptr(k, &r[1 + d], s, 1), blk_ptr(k, &r[0], s, 0), n);
      return 0;
    case PLAN_OP_UPKT:
      return exec_get_pkts(k, blk_ptr(k, &r[1], s, 0), blk_ptr(k, &r[0], s, 1), n, -1);
    case PLAN_OP_RPPKT:
      for (uint64_t t = 0; t < n; t += EXEC_TILE) {
        uint64_t m = n - t < EXEC_TILE ? n - t : EXEC_TILE;
        if (exec_get_pkts(k, k->temp, blk_ptr(k, &r[0], s + t, 1), m, -1)) return -1;
        for (uint16_t d = 0; d < op->ndst; d++) exec_put_pkts(k, blk_ptr(k, &r[1 + d], s + t, 1), k->temp, m);
      }
      return 0;
    default: /* repkt, respkt, recpkt, recspkt */
      if (n % k->c->esize)
        return blk_fail(k, mscclppInvalidUsage, "reduces %llu bytes, not a whole number of %zu-byte elements",
                        (unsigned long long)n, k->c->esize);
      for (uint64_t t = 0; t < n; t += EXEC_TILE)
        if (reduce_pkts_tile(k, op, s + t, n - t < EXEC_TILE ? n - t : EXEC_TILE)) return -1;
      return 0;
  }
}

/* Address of the switch ref's range + s in group member g's buffer. */
static char* sw_ptr(struct blk* k, const struct plan_ref* r, int g, uint64_t s, int pkt) {
  const struct plan_switch* sw = &k->c->pr->sw[r->sw];
  uint64_t off = blk_ref_off(k, r, NULL) + s;
  return blk_base(k, sw->ranks[g], r->btype) + (pkt ? 2 * off : off);
}

int exec_switch_op(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n) {
  const struct plan_ref* r = &k->bl->refs[op->first_ref];
  if (op->code == PLAN_OP_GSTORE || op->code == PLAN_OP_GSTOREPKT) {
    const char* src = blk_ptr(k, &r[0], s, 0);
    for (uint16_t d = 0; d < op->ndst; d++) {
      const struct plan_switch* sw = &k->c->pr->sw[r[1 + d].sw];
      for (int g = 0; g < sw->nranks; g++) {
        if (op->code == PLAN_OP_GSTORE) memmove(sw_ptr(k, &r[1 + d], g, 0, 0) + s, src, n);
        else exec_put_pkts(k, sw_ptr(k, &r[1 + d], g, s, 1), src, n);
      }
    }
    return 0;
  }
  if (n % k->c->esize)
    return blk_fail(k, mscclppInvalidUsage, "reduces %llu bytes, not a whole number of %zu-byte elements",
                    (unsigned long long)n, k->c->esize);
  const struct plan_switch* sw = &k->c->pr->sw[r[0].sw];
  const void** srcs = ptrs(k);
  for (uint64_t t = 0; t < n; t += EXEC_TILE) { /* load-reduce a tile from the group, then store */
    uint64_t m = n - t < EXEC_TILE ? n - t : EXEC_TILE;
    for (int g = 0; g < sw->nranks; g++) srcs[g] = sw_ptr(k, &r[0], g, s + t, 0);
    algo_reduce(k->temp, srcs, sw->nranks, m / k->c->esize, k->c->dtype, (enum algo_op)op->redop, 1, NULL);
    for (uint16_t d = 0; d < op->ndst; d++) {
      const struct plan_ref* dr = &r[op->nsrc + d];
      if (op->code == PLAN_OP_GLRE) {
        memcpy(blk_ptr(k, dr, s + t, 0), k->temp, m);
        continue;
      }
      const struct plan_switch* dsw = &k->c->pr->sw[dr->sw];
      for (int g = 0; g < dsw->nranks; g++) memcpy(sw_ptr(k, dr, g, s + t, 0), k->temp, m);
    }
  }
  return 0;
}
