/* check.c - the checks that need the whole plan: chunk ranges against the owner's chunk counts,
 * channels paired across ranks, every signal matched by a wait on the peer's side (per channel
 * pair and pipeline context), barrier ids met by the number of blocks they name, semaphores that
 * can be acquired. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/load/lower.h"
#include "util/vec.h"

static uint32_t chunks_of(const struct plan_rank* pr, int btype) {
  return btype == PLAN_BUF_IN ? pr->in_chunks : btype == PLAN_BUF_OUT ? pr->out_chunks : pr->scr_chunks;
}

static mscclppResult_t check_range(const struct mscclppPlan* p, struct pj_where* w, const struct plan_ref* r,
                                   const char* key) {
  int owners[1] = {r->rank};
  const int* list = owners;
  int n = 1;
  if (r->kind == PLAN_REF_SWITCH) list = p->ranks[w->gpu].sw[r->sw].ranks, n = p->ranks[w->gpu].sw[r->sw].nranks;
  for (int i = 0; i < n; i++) {
    uint32_t c = chunks_of(&p->ranks[list[i]], r->btype);
    if ((uint64_t)r->index + r->size > c)
      return pj_fail(w, key, "chunks [%u, %u) of buffer %s of rank %d, which has %u chunks", r->index,
                     r->index + r->size, plan_buf_names[r->btype], list[i], c);
  }
  return mscclppSuccess;
}

/* One signal (+1) or wait (-1) on the semaphore of (sender -> receiver, type, ordinal) in a
 * pipeline context. */
struct sig_ev {
  int32_t type, sender, receiver, ord;
  uint64_t unit, nchunks;
  int32_t delta, gpu, tb, op;
};

static int ev_cmp(const void* a, const void* b) {
  const struct sig_ev *x = a, *y = b;
#define CMP(f) if (x->f != y->f) return x->f < y->f ? -1 : 1
  CMP(type); CMP(sender); CMP(receiver); CMP(ord); CMP(unit); CMP(nchunks);
#undef CMP
  return 0;
}

static int signals(int c) { return c == PLAN_OP_SIGNAL || c == PLAN_OP_RLXSIGNAL || c == PLAN_OP_PWS || c == PLAN_OP_PWSF; }
static int waits(int c) { return c == PLAN_OP_WAIT || c == PLAN_OP_RLXWAIT; }

struct ev_list {
  struct sig_ev* ev;
  size_t n, cap;
};

static mscclppResult_t ev_add(struct ev_list* l, struct sig_ev e) {
  if (vec_reserve((void**)&l->ev, &l->cap, l->n + 1, sizeof(*l->ev)))
    return MPP_ERR(mscclppSystemError, "plan: out of memory");
  l->ev[l->n++] = e;
  return mscclppSuccess;
}

/* Ranges and signal events of one block. */
static mscclppResult_t check_block(const struct mscclppPlan* p, struct pj_where* w, const struct plan_block* b,
                                   struct ev_list* l) {
  uint64_t unit = 0, nch = 0;
  uint32_t pipe_left = 0;
  for (uint32_t i = 0; i < b->nops; i++) {
    const struct plan_op* op = &b->ops[i];
    w->op = (int)i;
    for (uint16_t k = 0; k < op->nsrc + op->ndst; k++)
      MPP_CHECK(check_range(p, w, &b->refs[op->first_ref + k], k < op->nsrc ? "src_buff" : "dst_buff"));
    if (op->code == PLAN_OP_PIPELINE) {
      if (op->nested) unit = op->unit_size, nch = op->num_chunks, pipe_left = op->nested;
      continue;
    }
    if (signals(op->code) || waits(op->code))
      for (uint16_t k = 0; k < op->nchan; k++) {
        const struct plan_chanref* c = &b->chans[op->first_chan + k];
        int snd = signals(op->code);
        struct sig_ev e = {op->chan_type, snd ? w->gpu : c->peer, snd ? c->peer : w->gpu, c->ord, unit, nch,
                           snd ? 1 : -1, w->gpu, w->tb, (int)i};
        MPP_CHECK(ev_add(l, e));
      }
    if (pipe_left && --pipe_left == 0) unit = 0, nch = 0;
  }
  w->op = -1;
  return mscclppSuccess;
}

static mscclppResult_t check_balance(const struct mscclppPlan* p, struct ev_list* l) {
  if (l->n == 0) return mscclppSuccess;
  qsort(l->ev, l->n, sizeof(*l->ev), ev_cmp);
  for (size_t i = 0; i < l->n;) {
    size_t j = i;
    long sum = 0;
    for (; j < l->n && ev_cmp(&l->ev[i], &l->ev[j]) == 0; j++) sum += l->ev[j].delta;
    if (sum) {
      const struct sig_ev* e = &l->ev[i];
      return MPP_ERR(mscclppInvalidArgument,
                     "%s: signal/wait imbalance on %s channel %d from gpu %d to gpu %d%s: %ld more %s than %s "
                     "(first at gpu %d threadblock %d op %d)",
                     p->file, plan_chan_names[e->type], e->ord, e->sender, e->receiver,
                     e->unit ? " inside a pipeline" : "", labs(sum), sum > 0 ? "signals" : "waits",
                     sum > 0 ? "waits" : "signals", e->gpu, e->tb, e->op);
    }
    i = j;
  }
  return mscclppSuccess;
}

/* Channels of each type between r and p: as many at r towards p as at p towards r. */
static mscclppResult_t check_pairs(const struct mscclppPlan* p) {
  for (int r = 0; r < p->nranks; r++)
    for (int q = 0; q < p->nranks; q++)
      for (int t = PLAN_CH_MEMORY; t <= PLAN_CH_PORT; t++) {
        int a = p->ranks[r].pair_count[q * 4 + t], b = p->ranks[q].pair_count[r * 4 + t];
        if (a != b)
          return MPP_ERR(mscclppInvalidArgument,
                         "%s: gpu %d field 'channels': %d %s channels connected to gpu %d, but gpu %d has %d to gpu %d",
                         p->file, r, a, plan_chan_names[t], q, q, b, r);
      }
  return mscclppSuccess;
}

mscclppResult_t plan_check(const struct mscclppPlan* cp) {
  struct mscclppPlan* p = (struct mscclppPlan*)cp;
  struct pj_where w = {.plan = p->file, .gpu = -1, .tb = -1, .op = -1, .nested = -1};
  struct ev_list l = {0};
  mscclppResult_t res = mscclppSuccess;
  MPP_CHECK(check_pairs(p));
  for (int r = 0; r < p->nranks && res == mscclppSuccess; r++) {
    w.gpu = r;
    for (int b = 0; b < p->ranks[r].nblocks && res == mscclppSuccess; b++) {
      w.tb = b;
      res = check_block(p, &w, &p->ranks[r].blocks[b], &l);
    }
    w.tb = -1;
    if (res == mscclppSuccess) res = check_sync(p, &w, &p->ranks[r]);
  }
  if (res == mscclppSuccess) res = check_balance(p, &l);
  free(l.ev);
  return res;
}
