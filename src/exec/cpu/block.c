/* block.c - one threadblock of a plan on a host thread: walks its ops (pipelines repeat their
 * nested ops over unit_size windows), cuts each op's byte range (pipeline window, then tbg slice)
 * and hands it to the op (ops_data.c, ops_sync.c). */
#include <stdarg.h>
#include <stdio.h>

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

/* Base of rank owner's buffer btype in this call (scratch: this call's half). */
char* blk_base(const struct blk* k, int owner, int btype) {
  const struct exec_call* c = k->c;
  char* b = c->st->peer_data[owner] + c->st->peer_off[owner * 3 + btype];
  return btype == PLAN_BUF_SCR ? b + c->scr_half : b;
}

char* blk_ptr(const struct blk* k, const struct plan_ref* r, uint64_t s, int pkt) {
  uint64_t off = blk_ref_off(k, r, NULL) + s;
  return blk_base(k, r->kind == PLAN_REF_LOCAL ? k->c->st->rank : r->rank, r->btype) + (pkt ? 2 * off : off);
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
