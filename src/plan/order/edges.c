/* edges.c - the same-call edges of the order check (plan/order/order.h): the n-th signal on a channel
 * to the n-th wait on its pair, barrier occurrences, semaphore releases to acquires, and packet
 * writes to the reads of the same scratch bytes (port channels' edges: plan/order/port.c). Collected as
 * (event, predecessor) pairs, then laid out per thread and event (g->pred_at). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/load/lower.h"
#include "plan/order/edges.h"
#include "util/vec.h"

int rg_add_edge(struct rg_edges* l, int t, uint32_t i, int ft, uint32_t fi) {
  if (l->n >= l->max) return -1;
  if (vec_reserve((void**)&l->e, &l->cap, l->n + 1, sizeof(*l->e))) return -1;
  l->e[l->n++] = (struct rg_edge){t, i, {ft, fi}};
  return 0;
}

struct rg_span rg_ref_span(const struct plan_op* op, const struct plan_ref* ref, int packet) {
  double lo = ref->index, size = ref->size;
  if (packet) lo *= 2, size *= 2;
  if (op->tbg_size <= 1) return (struct rg_span){lo, lo + size};
  /* Slice k starts where slice k - 1 ends: both bounds come from the one expression, so the
   * slices of a group partition the range exactly (a width added to a start would round
   * differently from slice to slice and make neighbours overlap by an ulp). */
  return (struct rg_span){lo + size * op->tbg_id / op->tbg_size, lo + size * (op->tbg_id + 1) / op->tbg_size};
}

int rg_ref_owners(const struct mscclppPlan* p, int r, const struct plan_ref* ref, int* out, int max) {
  if (ref->kind != PLAN_REF_SWITCH) {
    out[0] = ref->kind == PLAN_REF_REMOTE ? ref->rank : r;
    return 1;
  }
  const struct plan_switch* s = &p->ranks[r].sw[ref->sw];
  int n = s->nranks < max ? s->nranks : max;
  memcpy(out, s->ranks, (size_t)n * sizeof(int));
  return n;
}

/* One end of a channel's semaphore: op i of thread t signals (wait 0) or waits on (wait 1) the
 * semaphore of (sender -> receiver, type, ordinal) in a pipeline context. */
struct chev {
  int type, sender, receiver, ord;
  uint64_t unit, nch;
  int wait, t;
  uint32_t i;
};

static int chev_cmp(const void* a, const void* b) {
  const struct chev *x = a, *y = b;
#define CMP(f) if (x->f != y->f) return x->f < y->f ? -1 : 1
  CMP(type); CMP(sender); CMP(receiver); CMP(ord); CMP(unit); CMP(nch); CMP(wait); CMP(t); CMP(i);
#undef CMP
  return 0;
}

static int is_signal(int c) { return c == PLAN_OP_SIGNAL || c == PLAN_OP_RLXSIGNAL || c == PLAN_OP_PWS || c == PLAN_OP_PWSF; }
static int is_wait(int c) { return c == PLAN_OP_WAIT || c == PLAN_OP_RLXWAIT; }

/* Every signal and wait of every block, one entry per channel of the op, appended to *v (*n of
 * them, room for *cap); -1 when out of memory. */
static int collect_chevs(struct rg_graph* g, struct chev** v, size_t* n, size_t* cap) {
  for (int t = 0; t < g->nblock_threads; t++) {
    const struct plan_block* b = g->blk[t];
    uint64_t unit = 0, nch = 0;
    uint32_t left = 0;
    for (uint32_t i = 0; i < b->nops; i++) {
      const struct plan_op* op = &b->ops[i];
      if (op->code == PLAN_OP_PIPELINE && op->nested) {
        unit = op->unit_size, nch = op->num_chunks, left = op->nested;
        continue;
      }
      int r = g->rank_of[t], w = is_wait(op->code);
      for (uint16_t c = 0; (w || is_signal(op->code)) && c < op->nchan; c++) {
        const struct plan_chanref* ch = &b->chans[op->first_chan + c];
        int st = t; /* a port channel's signal comes from its proxy */
        uint32_t si = i;
        if (!w && rg_port_async(op) && rg_proxy_event(g, t, i, ch, &st, &si)) return -1;
        if (vec_reserve((void**)v, cap, *n + 1, sizeof(**v))) return -1;
        (*v)[(*n)++] = (struct chev){op->chan_type, w ? ch->peer : r, w ? r : ch->peer, ch->ord, unit, nch, w, st, si};
      }
      if (left && --left == 0) unit = 0, nch = 0;
    }
  }
  return 0;
}

static int same_chan(const struct chev* x, const struct chev* y) {
  return x->type == y->type && x->sender == y->sender && x->receiver == y->receiver && x->ord == y->ord &&
         x->unit == y->unit && x->nch == y->nch;
}

/* Keeps a copy of a counter's increments and waits for rg_refine. */
static int add_group(struct rg_graph* g, const struct rg_pred* inc, size_t S, const struct rg_pred* wt, size_t W,
                     int64_t init) {
  if (vec_reserve((void**)&g->groups, &g->capgroups, g->ngroups + 1, sizeof(*g->groups))) return -1;
  struct rg_group* q = &g->groups[g->ngroups];
  q->inc = malloc(S * sizeof(*inc)), q->wt = malloc((W ? W : 1) * sizeof(*wt));
  if (!q->inc || !q->wt) {
    free(q->inc), free(q->wt);
    return -1;
  }
  memcpy(q->inc, inc, S * sizeof(*inc)), memcpy(q->wt, wt, W * sizeof(*wt));
  q->ninc = S, q->nwt = W, q->init = init;
  g->ngroups++;
  return 0;
}

/* Edges into the waits of one counter (in program order, one block) from its increments (sorted
 * by block, then program order; any number of blocks). The n-th wait (1-based) returns once n -
 * init increments happened; whichever they were, a block with m of the S increments gave at
 * least n - init - (S - m) of them, so the wait comes after that one of the block's increments
 * (exact when one block increments). */
static int count_edges(struct rg_graph* g, const struct rg_pred* inc, size_t S, const struct rg_pred* wt, size_t W,
                       int64_t init) {
  struct rg_edges* l = &g->el;
  if (S > 1 && inc[S - 1].t != inc[0].t && add_group(g, inc, S, wt, W, init)) return -1;
  for (size_t a = 0; a < S;) {
    size_t b = a;
    while (b < S && inc[b].t == inc[a].t) b++;
    if (rg_spend(g, W + 1)) return 1;
    int64_t m = (int64_t)(b - a);
    for (size_t n = 1; n <= W; n++) {
      int64_t j = (int64_t)n - init - ((int64_t)S - m);
      if (j >= 1 && j <= m && rg_add_edge(l, wt[n - 1].t, wt[n - 1].i, inc[a + (size_t)j - 1].t, inc[a + (size_t)j - 1].i))
        return -1;
    }
    a = b;
  }
  return 0;
}

/* The waits of each channel after the signals they must have seen (count_edges); 1 when a
 * channel is waited on by more than one block. */
static int signal_edges(struct rg_graph* g, char* why, size_t why_len) {
  size_t n = 0, cap = 0;
  struct chev* v = NULL;
  int res = collect_chevs(g, &v, &n, &cap);
  struct rg_pred* at = res ? NULL : malloc((n ? n : 1) * sizeof(*at));
  if (!at) res = -1;
  if (!res && n) qsort(v, n, sizeof(*v), chev_cmp);
  for (size_t k = 0; !res && k < n; k++) at[k] = (struct rg_pred){v[k].t, v[k].i};
  for (size_t s = 0; !res && s < n;) {
    size_t w = s, e;
    while (w < n && !v[w].wait && same_chan(&v[w], &v[s])) w++;
    for (e = w; e < n && same_chan(&v[e], &v[s]);) e++;
    for (size_t k = w; k < e && !res; k++)
      if (v[k].t != v[w].t) {
        snprintf(why, why_len, "%s channel %d from gpu %d to gpu %d is waited on by more than one threadblock",
                 plan_chan_names[v[k].type], v[k].ord, v[k].sender, v[k].receiver);
        res = 1;
      }
    if (!res) res = count_edges(g, at + s, w - s, at + w, e - w, 0);
    s = e;
  }
  free(v), free(at);
  return res;
}

/* One barrier op of a rank: its id, block, position and which occurrence of the id in that
 * block it is. */
struct bar {
  int id, block;
  uint32_t op, m;
};

static int bar_by_block(const void* a, const void* b) {
  const struct bar *x = a, *y = b;
  if (x->id != y->id) return x->id < y->id ? -1 : 1;
  if (x->block != y->block) return x->block < y->block ? -1 : 1;
  return x->op < y->op ? -1 : x->op > y->op;
}

static int bar_by_occurrence(const void* a, const void* b) {
  const struct bar *x = a, *y = b;
  if (x->id != y->id) return x->id < y->id ? -1 : 1;
  if (x->m != y->m) return x->m < y->m ? -1 : 1;
  return x->block < y->block ? -1 : x->block > y->block;
}

/* The barrier ops of rank r, grouped by (id, occurrence): *n of them. */
static struct bar* rank_barriers(const struct plan_rank* pr, size_t* n) {
  size_t cap = 0;
  struct bar* v = NULL;
  *n = 0;
  for (int b = 0; b < pr->nblocks; b++)
    for (uint32_t i = 0; i < pr->blocks[b].nops; i++) {
      if (pr->blocks[b].ops[i].code != PLAN_OP_BARRIER) continue;
      if (vec_reserve((void**)&v, &cap, *n + 1, sizeof(*v))) return free(v), NULL;
      v[(*n)++] = (struct bar){pr->blocks[b].ops[i].barrier_id, b, i, 0};
    }
  if (!*n) return malloc(1);
  qsort(v, *n, sizeof(*v), bar_by_block);
  for (size_t k = 1; k < *n; k++)
    if (v[k].id == v[k - 1].id && v[k].block == v[k - 1].block) v[k].m = v[k - 1].m + 1;
  qsort(v, *n, sizeof(*v), bar_by_occurrence);
  return v;
}

/* Each block's m-th occurrence of a barrier id after the op before every other block's m-th: in
 * 2(k - 1) edges for k blocks, the first block's barrier op after the others' ops before theirs,
 * and their barrier ops after it. */
static int barrier_edges(struct rg_graph* g, struct rg_edges* l) {
  for (int r = 0; r < g->p->nranks; r++) {
    size_t n;
    struct bar* v = rank_barriers(&g->p->ranks[r], &n);
    if (!v) return -1;
    int t0 = g->first_thread[r], res = 0;
    for (size_t s = 0, e; s < n && !res; s = e) {
      for (e = s; e < n && v[e].id == v[s].id && v[e].m == v[s].m;) e++;
      if (rg_spend(g, 2 * (e - s))) res = 1;
      for (size_t b = s + 1; b < e && !res; b++) {
        if (v[b].op > 0) res = rg_add_edge(l, t0 + v[s].block, v[s].op, t0 + v[b].block, v[b].op - 1);
        if (!res) res = rg_add_edge(l, t0 + v[b].block, v[b].op, t0 + v[s].block, v[s].op);
      }
    }
    free(v);
    if (res) return res;
  }
  return 0;
}

/* Op positions (thread, op) of one side of a semaphore. */
struct side {
  struct rg_pred* at;
  size_t n, cap;
};

static int side_add(struct side* s, int t, uint32_t i) {
  if (vec_reserve((void**)&s->at, &s->cap, s->n + 1, sizeof(*s->at))) return -1;
  s->at[s->n++] = (struct rg_pred){t, i};
  return 0;
}

/* Releases (by block, then program order) and acquires of semaphore id of rank r; 1 when the
 * acquires span blocks (why filled). */
static int sem_sides(const struct rg_graph* g, int r, int id, struct side* rel, struct side* acq, char* why,
                     size_t why_len) {
  const struct plan_rank* pr = &g->p->ranks[r];
  for (int b = 0; b < pr->nblocks; b++)
    for (uint32_t i = 0; i < pr->blocks[b].nops; i++) {
      const struct plan_op* op = &pr->blocks[b].ops[i];
      if (op->code != PLAN_OP_SEM_RELEASE && op->code != PLAN_OP_SEM_ACQUIRE) continue;
      struct side* s = op->code == PLAN_OP_SEM_RELEASE ? rel : acq;
      for (uint16_t c = 0; c < op->nchan; c++)
        if (pr->blocks[b].chans[op->first_chan + c].ord == id && side_add(s, g->first_thread[r] + b, i)) return -1;
    }
  for (size_t k = 1; k < acq->n; k++)
    if (acq->at[k].t != acq->at[0].t) {
      snprintf(why, why_len, "semaphore %d of gpu %d is acquired by more than one threadblock", id, r);
      return 1;
    }
  return 0;
}

/* Each acquire of a semaphore after the releases it must have seen (count_edges). */
static int sem_edges(struct rg_graph* g, char* why, size_t why_len) {
  for (int r = 0; r < g->p->nranks; r++)
    for (int id = 0; id < g->p->ranks[r].nsems; id++) {
      struct side rel = {0}, acq = {0};
      int res = sem_sides(g, r, id, &rel, &acq, why, why_len);
      if (!res) res = count_edges(g, rel.at, rel.n, acq.at, acq.n, g->p->ranks[r].sem_init[id]);
      free(rel.at), free(acq.at);
      if (res) return res;
    }
  return 0;
}

/* A packet reference: where its bytes are and which op writes or reads them. */
struct pkt {
  int owner, t;
  uint32_t i;
  struct rg_span sp;
};

/* Packet writes (dst 1) or reads (dst 0) of every op, appended to *v (*n, room for *cap); own
 * has room for every rank. -1 when out of memory. */
static int collect_pkts(const struct rg_graph* g, int dst, int* own, struct pkt** v, size_t* n, size_t* cap) {
  for (int t = 0; t < g->nblock_threads; t++)
    for (uint32_t i = 0; i < g->blk[t]->nops; i++) {
      const struct plan_op* op = &g->blk[t]->ops[i];
      uint16_t first = dst ? op->nsrc : 0, cnt = dst ? op->ndst : op->nsrc;
      for (uint16_t j = 0; j < cnt; j++) {
        if (!plan_ref_is_packet(op->code, dst, j)) continue;
        const struct plan_ref* ref = &g->blk[t]->refs[op->first_ref + first + j];
        int no = rg_ref_owners(g->p, g->rank_of[t], ref, own, g->p->nranks);
        if (vec_reserve((void**)v, cap, *n + (size_t)no, sizeof(**v))) return -1;
        for (int o = 0; o < no; o++) (*v)[(*n)++] = (struct pkt){own[o], t, i, rg_ref_span(op, ref, 1)};
      }
    }
  return 0;
}

/* Every packet read after every write of the same bytes in the call; 2 when a read has no
 * writer at all (it would wait forever). */
static int packet_edges(struct rg_graph* g, struct rg_edges* l, char* why, size_t why_len) {
  size_t nw = 0, nr = 0, cw = 0, cr = 0;
  struct pkt *w = NULL, *rd = NULL;
  int* own = malloc((size_t)g->p->nranks * sizeof(int));
  int res = !own || collect_pkts(g, 1, own, &w, &nw, &cw) || collect_pkts(g, 0, own, &rd, &nr, &cr) ? -1 : 0;
  free(own);
  for (size_t a = 0; !res && a < nr; a++) {
    int found = 0;
    if (rg_spend(g, nw + 1)) res = 1;
    for (size_t b = 0; !res && b < nw; b++) {
      if (w[b].owner != rd[a].owner || (w[b].t == rd[a].t && w[b].i == rd[a].i)) continue;
      if (w[b].sp.lo >= rd[a].sp.hi || rd[a].sp.lo >= w[b].sp.hi) continue;
      found = 1;
      if (rg_add_edge(l, rd[a].t, rd[a].i, w[b].t, w[b].i)) res = -1;
    }
    if (!found && !res) {
      int r = rd[a].owner, t = rd[a].t;
      snprintf(why, why_len, "gpu %d threadblock %d op %u (%s) waits for packets in scratch that no op writes", r,
               t - g->first_thread[r], rd[a].i, plan_op_name(g->blk[t]->ops[rd[a].i].code));
      res = 2;
    }
  }
  free(w), free(rd);
  return res;
}

static int edge_cmp(const void* a, const void* b) {
  const struct rg_edge *x = a, *y = b;
  if (x->t != y->t) return x->t < y->t ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

/* Lays the edges out per thread and event: preds of event i of thread t (a block or a proxy) at
 * pred_at[t][i] .. [i + 1). */
static int layout(struct rg_graph* g) {
  struct rg_edges* l = &g->el;
  if (l->n) qsort(l->e, l->n, sizeof(*l->e), edge_cmp);
  free(g->preds);
  g->preds = malloc((l->n ? l->n : 1) * sizeof(*g->preds));
  if (!g->preds) return -1;
  size_t k = 0;
  for (int t = 0; t < g->nthreads; t++) {
    if (t >= g->nblock_threads && t < g->first_proxy) continue; /* callers: no edge lists */
    uint32_t n = g->per_call[t];
    if (!g->pred_at[t]) g->pred_at[t] = malloc(((size_t)n + 1) * sizeof(uint32_t));
    if (!g->pred_at[t]) return -1;
    for (uint32_t i = 0; i <= n; i++) {
      g->pred_at[t][i] = (uint32_t)k;
      while (i < n && k < l->n && l->e[k].t == t && l->e[k].i == i) g->preds[k] = l->e[k].from, k++;
    }
  }
  g->npreds = k;
  return 0;
}

int rg_edges(struct rg_graph* g, char* why, size_t why_len) {
  struct rg_edges* l = &g->el;
  int res = signal_edges(g, why, why_len);
  if (!res) res = barrier_edges(g, l);
  if (!res) res = sem_edges(g, why, why_len);
  if (!res) res = packet_edges(g, l, why, why_len);
  if (!res) res = rg_port_edges(g);
  if (!res) res = layout(g);
  return res;
}

static struct rg_ev ev0(struct rg_pred p) { return (struct rg_ev){p.t, 0, p.i}; }

/* Whether increment k of group q must come before its n-th wait (1-based): fewer than n - init
 * other increments can happen before that wait without it (those that come after it, or after
 * the wait, cannot). */
static int must_see(struct rg_graph* g, const struct rg_group* q, size_t k, size_t n) {
  int64_t avail = 0;
  if (rg_spend(g, q->ninc)) return 0;
  struct rg_ev inc = ev0(q->inc[k]), wt = ev0(q->wt[n - 1]);
  if (rg_before(g, inc, wt)) return 0; /* already ordered */
  for (size_t j = 0; j < q->ninc; j++)
    if (j != k && !rg_before(g, inc, ev0(q->inc[j])) && !rg_before(g, wt, ev0(q->inc[j]))) avail++;
  return avail < (int64_t)n - q->init;
}

long rg_refine(struct rg_graph* g) {
  long added = 0;
  for (size_t a = 0; a < g->ngroups; a++) {
    const struct rg_group* q = &g->groups[a];
    for (size_t n = 1; n <= q->nwt && !g->over; n++)
      for (size_t k = 0; (int64_t)n > q->init && k < q->ninc; k++)
        if (must_see(g, q, k, n)) {
          if (rg_add_edge(&g->el, q->wt[n - 1].t, q->wt[n - 1].i, q->inc[k].t, q->inc[k].i)) return -1;
          added++;
        }
  }
  if (added && layout(g)) return -1;
  return added;
}
