/* ops_pkt.c - LL16 packet ops (flag = the call's launch number) and switch-channel ops emulated
 * over the group's mapped memory. Packet reductions and switch reductions work in tiles of
 * EXEC_TILE bytes through the block's temp space, so no op allocates. */
#include <string.h>

#include "elem/reduce.h"
#include "exec/cpu/block.h"

/* n bytes of data src as packets at offset pkt_off of owner's buffer btype. 0, or -1 after blk_fail. */
static int exec_put_pkts(struct blk* k, int owner, int btype, uint64_t pkt_off, const char* src, uint64_t n) {
  char* dst = blk_at(k, owner, btype, pkt_off);
  if (dst) {
    mscclppPutPacketsLL16((mscclppLL16Packet*)dst, src, n, k->c->flag, 0, 1);
    return 0;
  }
  /* Another host: the packets are made in two tiles here, then written (whole 8-byte words land
   * whole there, so a reader never sees a flag before its data). */
  char* pk = blk_rtile(k, k->c->ps->maxrefs + 1);
  for (uint64_t t = 0; t < n; t += EXEC_RTILE) {
    uint64_t m = n - t < EXEC_RTILE ? n - t : EXEC_RTILE;
    mscclppPutPacketsLL16((mscclppLL16Packet*)pk, src + t, m, k->c->flag, 0, 1);
    if (blk_write_at(k, owner, btype, pkt_off + 2 * t, pk, 2 * ((m + 7) / 8 * 8))) return -1;
  }
  return 0;
}

/* Packets of n bytes at src to ref's range + s. */
static int put_pkts_ref(struct blk* k, const struct plan_ref* r, uint64_t s, const char* src, uint64_t n) {
  return exec_put_pkts(k, blk_owner(k, r), r->btype, 2 * (blk_ref_off(k, r, NULL) + s), src, n);
}

/* The packets at pkts (local) into n bytes of data at dst, each awaited (bounded) for the call's flag. */
static int exec_get_pkts(struct blk* k, char* dst, const char* pkts, uint64_t n, int peer) {
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
  char* dst = blk_here(k, &r[op->nsrc], s, 0);
  if (!(srcs[0] = blk_here(k, &r[0], s, 0)) || !dst) return -1;
  for (uint16_t i = 1; i < op->nsrc; i++) {
    char* t = k->temp + (size_t)EXEC_TILE * i;
    const char* pk = blk_here(k, &r[i], s, 1);
    if (!pk || exec_get_pkts(k, t, pk, m, -1)) return -1;
    srcs[i] = t;
  }
  elem_reduce(dst, srcs, op->nsrc, m / k->c->esize, k->c->dtype, (enum elem_op)op->redop, 1, NULL);
  for (uint16_t d = 1; d < op->ndst; d++)
    if (put_pkts_ref(k, &r[op->nsrc + d], s, dst, m)) return -1;
  return 0;
}

/* cpkt / ppkt: one source as packets to every destination, or source i to destination i. */
int exec_pkt_copy(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n) {
  const struct plan_ref* r = &k->bl->refs[op->first_ref];
  for (uint16_t d = 0; d < op->ndst; d++) {
    const char* src = blk_here(k, &r[op->nsrc == op->ndst ? d : 0], s, 0);
    if (!src || put_pkts_ref(k, &r[op->nsrc + d], s, src, n)) return -1;
  }
  return 0;
}

int exec_pkt_unpack(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n) {
  const struct plan_ref* r = &k->bl->refs[op->first_ref];
  char *dst = blk_here(k, &r[1], s, 0), *pk = blk_here(k, &r[0], s, 1);
  return dst && pk ? exec_get_pkts(k, dst, pk, n, -1) : -1;
}

/* rppkt: the packets of source i awaited, then sent on to destination i (one source: to every
 * destination), a tile at a time. */
static int forward_from(struct blk* k, const struct plan_ref* src, const struct plan_ref* dsts, uint16_t ndst,
                        uint64_t s, uint64_t n) {
  for (uint64_t t = 0; t < n; t += EXEC_TILE) {
    uint64_t m = n - t < EXEC_TILE ? n - t : EXEC_TILE;
    const char* pk = blk_here(k, src, s + t, 1);
    if (!pk || exec_get_pkts(k, k->temp, pk, m, -1)) return -1;
    for (uint16_t d = 0; d < ndst; d++)
      if (put_pkts_ref(k, &dsts[d], s + t, k->temp, m)) return -1;
  }
  return 0;
}

int exec_pkt_forward(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n) {
  const struct plan_ref* r = &k->bl->refs[op->first_ref];
  if (op->nsrc == 1) return forward_from(k, &r[0], &r[1], op->ndst, s, n);
  for (uint16_t d = 0; d < op->ndst; d++)
    if (forward_from(k, &r[d], &r[op->nsrc + d], 1, s, n)) return -1;
  return 0;
}

int exec_pkt_reduce(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n) {
  if (n % k->c->esize)
    return blk_fail(k, mscclppInvalidUsage, "reduces %llu bytes, not a whole number of %zu-byte elements",
                    (unsigned long long)n, k->c->esize);
  for (uint64_t t = 0; t < n; t += EXEC_TILE)
    if (reduce_pkts_tile(k, op, s + t, n - t < EXEC_TILE ? n - t : EXEC_TILE)) return -1;
  return 0;
}

/* Offset (data-equivalent, pkt: of packets) of the switch ref's range + s in a member's buffer. */
static uint64_t sw_off(const struct blk* k, const struct plan_ref* r, uint64_t s, int pkt) {
  uint64_t off = blk_ref_off(k, r, NULL) + s;
  return pkt ? 2 * off : off;
}

static const struct plan_switch* sw_of(const struct blk* k, const struct plan_ref* r) { return &k->c->pr->sw[r->sw]; }

/* gstore over [s, s+m): data, or (pkt) the data of packets already awaited, to every member of
 * every destination group. */
static int switch_store_tile(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t m, const char* src, int pkt) {
  const struct plan_ref* r = &k->bl->refs[op->first_ref];
  for (uint16_t d = 0; d < op->ndst; d++) {
    const struct plan_switch* sw = sw_of(k, &r[1 + d]);
    for (int g = 0; g < sw->nranks; g++) {
      int rc = pkt ? exec_put_pkts(k, sw->ranks[g], r[1 + d].btype, sw_off(k, &r[1 + d], s, 1), src, m)
                   : blk_write_at(k, sw->ranks[g], r[1 + d].btype, sw_off(k, &r[1 + d], s, 0), src, m);
      if (rc) return -1;
    }
  }
  return 0;
}

/* gstore: the source to every member of every destination group. gstorepkt: the source holds
 * packets (made earlier in this call); each is awaited, then stored again as packets. */
int exec_switch_store(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n) {
  const struct plan_ref* r = &k->bl->refs[op->first_ref];
  if (op->code == PLAN_OP_GSTORE) {
    const char* src = blk_here(k, &r[0], s, 0);
    return src ? switch_store_tile(k, op, s, n, src, 0) : -1;
  }
  for (uint64_t t = 0; t < n; t += EXEC_TILE) {
    uint64_t m = n - t < EXEC_TILE ? n - t : EXEC_TILE;
    const char* pk = blk_here(k, &r[0], s + t, 1);
    if (!pk || exec_get_pkts(k, k->temp, pk, m, -1) || switch_store_tile(k, op, s + t, m, k->temp, 1)) return -1;
  }
  return 0;
}

/* glre / glres over one tile [s, s+m): the group's members reduced (members on another host read
 * into remote tiles), then stored to the local destination or to every member of each group. */
static int switch_reduce_tile(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t m, int remote) {
  const struct plan_ref* r = &k->bl->refs[op->first_ref];
  const struct plan_switch* sw = sw_of(k, &r[0]);
  const void** srcs = ptrs(k);
  for (int g = 0; g < sw->nranks; g++) {
    const char* p = blk_at(k, sw->ranks[g], r[0].btype, sw_off(k, &r[0], s, 0));
    if (!p && blk_read_at(k, sw->ranks[g], r[0].btype, sw_off(k, &r[0], s, 0), blk_rtile(k, (uint32_t)g), m)) return -1;
    srcs[g] = p ? p : blk_rtile(k, (uint32_t)g);
  }
  char* res = remote ? blk_rtile(k, k->c->ps->maxrefs) : k->temp;
  elem_reduce(res, srcs, sw->nranks, m / k->c->esize, k->c->dtype, (enum elem_op)op->redop, 1, NULL);
  for (uint16_t d = 0; d < op->ndst; d++) {
    const struct plan_ref* dr = &r[op->nsrc + d];
    if (op->code == PLAN_OP_GLRE) {
      if (blk_write(k, dr, s, 0, res, m)) return -1;
      continue;
    }
    const struct plan_switch* dsw = sw_of(k, dr);
    for (int g = 0; g < dsw->nranks; g++)
      if (blk_write_at(k, dsw->ranks[g], dr->btype, sw_off(k, dr, s, 0), res, m)) return -1;
  }
  return 0;
}

int exec_switch_reduce(struct blk* k, const struct plan_op* op, uint64_t s, uint64_t n) {
  if (n % k->c->esize)
    return blk_fail(k, mscclppInvalidUsage, "reduces %llu bytes, not a whole number of %zu-byte elements",
                    (unsigned long long)n, k->c->esize);
  int remote = blk_op_remote(k, op);
  uint64_t tile = remote ? EXEC_RTILE : EXEC_TILE; /* a round trip per tile and member over tcp */
  for (uint64_t t = 0; t < n; t += tile)
    if (switch_reduce_tile(k, op, s + t, n - t < tile ? n - t : tile, remote)) return -1;
  return 0;
}
