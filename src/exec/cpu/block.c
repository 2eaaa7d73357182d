/* block.c - one threadblock of a plan on a host thread: walks its ops (pipelines repeat their
 * nested ops over unit_size windows), cuts each op's byte range (pipeline window, then tbg slice)
 * and hands it to the op (ops_data.c, ops_sync.c). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "exec/cpu/block.h"

#include "core/comm.h"

int blk_fail(struct blk* k, mscclppResult_t rc, const char* fmt, ...) {
  char* e = k->c->errs + (size_t)k->b * EXEC_ERR_LEN;
  int n = snprintf(e, EXEC_ERR_LEN, "%s: rank %d block %d op %u (%s): ", k->c->plan->file, k->c->st->rank, k->b,
                   k->op_index, plan_op_name(k->op ? k->op->code : -1));
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && n < EXEC_ERR_LEN) vsnprintf(e + n, EXEC_ERR_LEN - n, fmt, ap);
  va_end(ap);
  k->c->rcs[k->b] = rc;
  k->c->failed = 1;
  return -1;
}

int blk_spin(struct blk* k, uint32_t* spins, uint64_t t0, const char* what, int peer) {
  uint32_t s = ++*spins;
  if ((s & 63u) == 63u) sched_yield();
  if ((s & 255u) == 0) {
    char who[32] = "a peer (local scratch)";
    if (peer >= 0) snprintf(who, sizeof(who), "rank %d", peer);
    if (k->c->failed) return blk_fail(k, mscclppRemoteError, "stopped waiting for %s from %s: another block failed", what, who);
    if (comm_aborting(k->c->st->comm))
      return blk_fail(k, mscclppAborted, "stopped waiting for %s from %s: the communicator is being aborted", what, who);
    struct exec_cpu* st = k->c->st; /* a process of this host only now and then: it costs a syscall */
    if (peer >= 0 && peer != st->rank &&
        ((s & 4095u) == 0 ? exec_peer_alive(st, peer) : exec_remote_alive(st, peer)) != mscclppSuccess) {
      /* gone: fail at the next finding, after the caller has read its flag again (the peer may
       * have stored it just before it exited) */
      if (k->gone == peer + 1)
        return blk_fail(k, mscclppRemoteError, "stopped waiting for %s from %s: %s", what, who, err_last());
      k->gone = peer + 1;
    }
    if ((int64_t)(mscclppNowNs() - t0) > k->c->st->timeout_ns)
      return blk_fail(k, mscclppTimeout, "waited %lld ms for %s from %s", (long long)(k->c->st->timeout_ns / 1000000),
                      what, who);
  }
  return 0;
}

/* Data-equivalent byte offset of ref's chunks plus s, and the ref's length. */
uint64_t blk_ref_off(const struct blk* k, const struct plan_ref* r, uint64_t* len) {
  const struct plan_layout* l = &k->c->layout;
  uint64_t o0 = plan_chunk_off(l, r->btype, r->index);
  if (len) *len = plan_chunk_off(l, r->btype, (uint64_t)r->index + r->size) - o0;
  return o0;
}

int blk_owner(const struct blk* k, const struct plan_ref* r) {
  return r->kind == PLAN_REF_LOCAL ? k->c->st->rank : r->rank;
}

int blk_mapped(const struct blk* k, int owner) { return k->c->st->peer_data[owner] != NULL; }

/* Offset in rank owner's data region of offset off of its buffer btype in this call. */
static uint64_t region_off(const struct blk* k, int owner, int btype, uint64_t off) {
  const struct exec_call* c = k->c;
  return c->st->peer_off[owner * 3 + btype] + (btype == PLAN_BUF_SCR ? c->scr_half : 0) + off;
}

char* blk_at(const struct blk* k, int owner, int btype, uint64_t off) {
  char* base = k->c->st->peer_data[owner];
  return base ? base + region_off(k, owner, btype, off) : NULL;
}

char* blk_ptr(const struct blk* k, const struct plan_ref* r, uint64_t s, int pkt) {
  uint64_t off = blk_ref_off(k, r, NULL) + s;
  return blk_at(k, blk_owner(k, r), r->btype, pkt ? 2 * off : off);
}

static const char* buf_name(int btype) {
  return btype == PLAN_BUF_IN ? "input" : btype == PLAN_BUF_OUT ? "output" : "scratch";
}

char* blk_here(struct blk* k, const struct plan_ref* r, uint64_t s, int pkt) {
  char* p = blk_ptr(k, r, s, pkt);
  if (!p)
    blk_fail(k, mscclppInvalidUsage, "%s rank %d's %s in place, but that rank is on another host (this op works on "
             "mapped memory only)", pkt ? "reads packets of" : "uses", blk_owner(k, r), buf_name(r->btype));
  return p;
}

int blk_write_at(struct blk* k, int owner, int btype, uint64_t off, const void* src, uint64_t n) {
  char* p = blk_at(k, owner, btype, off);
  if (p) {
    memmove(p, src, n);
    return 0;
  }
  if (exec_remote_write(k->c->st, owner, 0, region_off(k, owner, btype, off), src, n) != mscclppSuccess)
    return blk_fail(k, mscclppRemoteError, "writing %llu bytes to rank %d: %s", (unsigned long long)n, owner, err_last());
  return 0;
}

int blk_read_at(struct blk* k, int owner, int btype, uint64_t off, void* dst, uint64_t n) {
  const char* p = blk_at(k, owner, btype, off);
  if (p) {
    memmove(dst, p, n);
    return 0;
  }
  if (exec_remote_read(k->c->st, owner, region_off(k, owner, btype, off), dst, n) != mscclppSuccess)
    return blk_fail(k, mscclppRemoteError, "reading %llu bytes of rank %d: %s", (unsigned long long)n, owner, err_last());
  return 0;
}

int blk_write(struct blk* k, const struct plan_ref* r, uint64_t s, int pkt, const void* src, uint64_t n) {
  uint64_t off = blk_ref_off(k, r, NULL) + s;
  return blk_write_at(k, blk_owner(k, r), r->btype, pkt ? 2 * off : off, src, n);
}

const char* blk_source(struct blk* k, const struct plan_ref* r, uint64_t s, uint64_t n, char* buf) {
  const char* p = blk_ptr(k, r, s, 0);
  if (p) return p;
  return blk_read_at(k, blk_owner(k, r), r->btype, blk_ref_off(k, r, NULL) + s, buf, n) ? NULL : buf;
}

char* blk_rtile(const struct blk* k, uint32_t i) { return k->c->ps->rtemp[k->b] + (size_t)i * EXEC_RTILE; }

int blk_op_remote(const struct blk* k, const struct plan_op* op) {
  if (!k->c->st->rem) return 0;
  const struct plan_ref* r = &k->bl->refs[op->first_ref];
  for (uint32_t i = 0; i < (uint32_t)op->nsrc + op->ndst; i++) {
    if (r[i].kind != PLAN_REF_SWITCH) {
      if (!blk_mapped(k, blk_owner(k, &r[i]))) return 1;
      continue;
    }
    const struct plan_switch* sw = &k->c->pr->sw[r[i].sw];
    for (int g = 0; g < sw->nranks; g++)
      if (!blk_mapped(k, sw->ranks[g])) return 1;
  }
  return 0;
}

/* The window [*s, *s + *n) of an op of length len: pipeline iteration it (unit u, 0 = none), then
 * this block's tbg slice, aligned to the plan's alignment (at least 8 for packets). */
static void window(const struct blk* k, const struct plan_op* op, uint64_t len, uint64_t it, uint64_t u, uint64_t* s,
                   uint64_t* n) {
  *s = 0, *n = len;
  if (u) {
    *s = it * u;
    *n = *s >= len ? 0 : (len - *s < u ? len - *s : u);
  }
  if (op->tbg_size > 1) {
    uint64_t a = k->c->plan->align < 8 ? 8 : k->c->plan->align;
    uint64_t per = (*n + op->tbg_size - 1) / op->tbg_size;
    per = (per + a - 1) / a * a;
    uint64_t lo = per * op->tbg_id, hi = lo + per;
    if (lo > *n) lo = *n;
    if (hi > *n) hi = *n;
    *s += lo, *n = hi - lo;
  }
}

static int run_one(struct blk* k, const struct plan_op* op, uint64_t it, uint64_t u) {
  uint64_t len = plan_op_len(&k->c->layout, k->bl->refs, op), s, n;
  if (u && len > k->iters * u)
    return blk_fail(k, mscclppInvalidUsage, "moves %llu bytes but its pipeline covers %llu x %llu",
                    (unsigned long long)len, (unsigned long long)k->iters, (unsigned long long)u);
  window(k, op, len, it, u, &s, &n);
  return exec_op(k, op, s, n);
}

void exec_block(void* arg, int b) {
  struct exec_call* c = arg;
  struct blk k = {.c = c, .b = b, .bl = &c->pr->blocks[b], .temp = c->ps->temp[b]};
  for (uint32_t i = 0; i < k.bl->nops && !c->failed; i++) {
    const struct plan_op* op = &k.bl->ops[i];
    k.op_index = i, k.op = op;
    if (op->code != PLAN_OP_PIPELINE) {
      if (run_one(&k, op, 0, 0)) return;
      continue;
    }
    uint64_t u = op->unit_size, total = (uint64_t)op->num_chunks * c->layout.chunk_max;
    k.iters = total ? (total + u - 1) / u : 1;
    for (uint64_t it = 0; it < k.iters; it++)
      for (uint32_t j = 1; j <= op->nested; j++) {
        k.op_index = i + j, k.op = &k.bl->ops[i + j];
        if (run_one(&k, k.op, it, u)) return;
      }
    i += op->nested;
  }
}
