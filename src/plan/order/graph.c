/* graph.c - the happens-before graph of the order check (plan/order/order.h): threads (blocks, callers,
 * port proxies) and their events, and a vector clock per event over the edges of plan/order/edges.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/order/order.h"
#include "plan/order/edges.h"

uint32_t rg_nevents(const struct rg_graph* g, int t) { return g->per_call[t] * (uint32_t)g->calls; }

uint32_t rg_index(const struct rg_graph* g, struct rg_ev e) { return (uint32_t)e.c * g->per_call[e.t] + e.i + 1; }

static const uint32_t* clock_of(const struct rg_graph* g, int t, uint32_t k) {
  return g->vc[t] + (size_t)(k - 1) * (size_t)g->nthreads;
}

int rg_before(const struct rg_graph* g, struct rg_ev a, struct rg_ev b) {
  return clock_of(g, b.t, rg_index(g, b))[a.t] >= rg_index(g, a);
}

/* Threads: every block of every rank, a caller thread per rank, then a proxy per port channel
 * driven asynchronously (rg_find_proxies). 0, 1 (why filled: not modelled) or -1. */
static int make_threads(struct rg_graph* g, const struct mscclppPlan* p, char* why, size_t why_len) {
  int n = 0;
  for (int r = 0; r < p->nranks; r++) n += p->ranks[r].nblocks;
  g->nblock_threads = n, g->first_proxy = n + p->nranks;
  size_t ranks = (unsigned)p->nranks, blocks = (unsigned)n; /* both checked at load (1024, 65536) */
  g->rank_of = calloc(blocks + ranks, sizeof(int));
  g->first_thread = calloc(ranks, sizeof(int));
  g->blk = calloc(blocks + 1, sizeof(*g->blk));
  if (!g->rank_of || !g->first_thread || !g->blk) return -1;
  for (int r = 0, t = 0; r < p->nranks; r++) {
    g->first_thread[r] = t;
    for (int b = 0; b < p->ranks[r].nblocks; b++, t++) g->rank_of[t] = r, g->blk[t] = &p->ranks[r].blocks[b];
    g->rank_of[n + r] = r;
  }
  int res = rg_find_proxies(g, why, why_len);
  if (res) return res;
  g->nthreads = g->first_proxy + (int)g->nproxies;
  size_t threads = (unsigned)g->nthreads;
  int* ro = realloc(g->rank_of, threads * sizeof(int));
  g->per_call = calloc(threads, sizeof(uint32_t));
  g->vc = calloc(threads, sizeof(*g->vc));
  g->done = calloc(threads, sizeof(*g->done));
  g->pred_at = calloc(threads, sizeof(*g->pred_at));
  if (ro) g->rank_of = ro;
  if (!ro || !g->per_call || !g->vc || !g->done || !g->pred_at) return -1;
  for (int t = 0; t < g->nthreads; t++) {
    int x = t - g->first_proxy;
    g->per_call[t] = t < n ? g->blk[t]->nops : x < 0 ? 1 : (uint32_t)g->proxies[x].n;
    if (x >= 0) g->rank_of[t] = g->proxies[x].rank;
  }
  return 0;
}

/* Room for every clock, or 1 (why filled) past max_clocks. */
static int alloc_clocks(struct rg_graph* g, size_t max_clocks, char* why, size_t why_len) {
  size_t events = 0;
  for (int t = 0; t < g->nthreads; t++) events += rg_nevents(g, t);
  if (events * (size_t)g->nthreads > max_clocks) {
    snprintf(why, why_len, "the plan has %zu events over %d threads, more than this check's limit of %zu clocks", events,
             g->nthreads, max_clocks);
    return 1;
  }
  for (int t = 0; t < g->nthreads; t++) {
    size_t n = (size_t)rg_nevents(g, t) * (size_t)g->nthreads;
    g->vc[t] = calloc(n ? n : 1, sizeof(uint32_t));
    if (!g->vc[t]) return -1;
  }
  return 0;
}

static void reset_clocks(struct rg_graph* g) {
  for (int t = 0; t < g->nthreads; t++) {
    memset(g->vc[t], 0, (size_t)rg_nevents(g, t) * (size_t)g->nthreads * sizeof(uint32_t));
    g->done[t] = 0;
  }
}

/* Whether every same-call predecessor of op i of block thread t in call c has its clock. */
static int preds_done(const struct rg_graph* g, int t, int c, uint32_t i) {
  for (uint32_t k = g->pred_at[t][i]; k < g->pred_at[t][i + 1]; k++) {
    const struct rg_pred* q = &g->preds[k];
    if (g->done[q->t] < rg_index(g, (struct rg_ev){q->t, c, q->i})) return 0;
  }
  return 1;
}

static void join(uint32_t* into, const uint32_t* from, int n) {
  for (int k = 0; k < n; k++)
    if (from[k] > into[k]) into[k] = from[k];
}

/* Clock of the caller's turn before call c of rank r: after every block of r ended call c - 1
 * (not the proxies: a transfer that no flush waited for may outlive the call). */
static int step_caller(struct rg_graph* g, int r) {
  int t = g->nblock_threads + r, c = (int)g->done[t];
  if (c >= g->calls) return 0;
  int last = r + 1 < g->p->nranks ? g->first_thread[r + 1] : g->nblock_threads;
  for (int b = g->first_thread[r]; b < last; b++)
    if (g->blk[b]->nops && g->done[b] < (uint32_t)c * g->blk[b]->nops) return 0;
  uint32_t* v = g->vc[t] + (size_t)c * (size_t)g->nthreads;
  if (c > 0) memcpy(v, clock_of(g, t, (uint32_t)c), (size_t)g->nthreads * sizeof(uint32_t));
  for (int b = g->first_thread[r]; c > 0 && b < last; b++)
    if (g->blk[b]->nops) join(v, clock_of(g, b, (uint32_t)c * g->blk[b]->nops), g->nthreads);
  v[t] = (uint32_t)c + 1;
  g->done[t]++;
  return 1;
}

/* Clock of the next event of block or proxy thread t when its predecessors have theirs (a
 * block's first op of a call also waits for its caller's turn). */
static int step_thread(struct rg_graph* g, int t) {
  uint32_t k = g->done[t], per = g->per_call[t];
  if (k >= rg_nevents(g, t)) return 0;
  int c = (int)(k / per);
  uint32_t i = k % per;
  int caller = t < g->nblock_threads && i == 0 ? g->nblock_threads + g->rank_of[t] : -1;
  if (caller >= 0 && g->done[caller] < (uint32_t)c + 1) return 0;
  if (!preds_done(g, t, c, i)) return 0;
  if (rg_spend(g, (size_t)(g->pred_at[t][i + 1] - g->pred_at[t][i] + 2) * (size_t)g->nthreads)) return 0;
  uint32_t* v = g->vc[t] + (size_t)k * (size_t)g->nthreads;
  if (k > 0) memcpy(v, clock_of(g, t, k), (size_t)g->nthreads * sizeof(uint32_t));
  if (caller >= 0) join(v, clock_of(g, caller, (uint32_t)c + 1), g->nthreads);
  for (uint32_t q = g->pred_at[t][i]; q < g->pred_at[t][i + 1]; q++) {
    const struct rg_pred* pr = &g->preds[q];
    join(v, clock_of(g, pr->t, rg_index(g, (struct rg_ev){pr->t, c, pr->i})), g->nthreads);
  }
  v[t] = k + 1;
  g->done[t]++;
  return 1;
}

/* Runs every thread as far as its predecessors allow; 0 when all finished, else 2 with the first
 * op that cannot proceed in why. */
static int run_clocks(struct rg_graph* g, char* why, size_t why_len) {
  for (int moved = 1; moved;) {
    moved = 0;
    for (int r = 0; r < g->p->nranks; r++) moved |= step_caller(g, r);
    for (int t = 0; t < g->nthreads; t++)
      while (t < g->nblock_threads || t >= g->first_proxy ? step_thread(g, t) : 0) moved = 1;
  }
  if (g->over) return 1; /* rg_build says why */
  for (int t = 0; t < g->nblock_threads; t++) {
    if (g->done[t] >= rg_nevents(g, t)) continue;
    uint32_t i = g->done[t] % g->blk[t]->nops;
    int r = g->rank_of[t];
    snprintf(why, why_len,
             "gpu %d threadblock %d op %u (%s) can never proceed: what it waits for comes only after it (a cycle of "
             "waits)",
             r, t - g->first_thread[r], i, plan_op_name(g->blk[t]->ops[i].code));
    return 2;
  }
  return 0;
}

/* 1 (why filled) when the plan's block ops alone, times its threads and calls, pass max_clocks:
 * checked first, so that nothing else is built for such a plan. */
static int too_large(const struct mscclppPlan* p, int calls, size_t max_clocks, char* why, size_t why_len) {
  size_t ops = 0, threads = (unsigned)p->nranks;
  for (int r = 0; r < p->nranks; r++)
    for (int b = 0; b < p->ranks[r].nblocks; b++) ops += p->ranks[r].blocks[b].nops, threads++;
  if (ops * (size_t)calls <= max_clocks / (threads ? threads : 1)) return 0;
  snprintf(why, why_len, "the plan has %zu ops over %zu threads, more than this check's limit of %zu clocks", ops, threads,
           max_clocks);
  return 1;
}

/* Whether the check ran out of steps or edges (the plan is too large); says so in why. */
static int ran_out(struct rg_graph* g, size_t max_clocks, char* why, size_t why_len) {
  if (!g->over && g->el.n < g->el.max) return 0;
  g->over = 1;
  snprintf(why, why_len, "the plan is too large for this check (past %zu steps or %zu edges)", rg_step_budget(max_clocks),
           g->el.max);
  return 1;
}

int rg_build(struct rg_graph* g, const struct mscclppPlan* p, size_t max_clocks, char* why, size_t why_len) {
  memset(g, 0, sizeof(*g));
  g->p = p, g->calls = p->double_scratch ? 3 : 2;
  g->work_left = rg_step_budget(max_clocks), g->el.max = max_clocks / 4 + 64; /* steps; edges (16 bytes each) */
  why[0] = '\0';
  if (too_large(p, g->calls, max_clocks, why, why_len)) return 1;
  int res = make_threads(g, p, why, why_len);
  if (!res) res = rg_edges(g, why, why_len);
  if (ran_out(g, max_clocks, why, why_len)) return 1;
  if (res) return res;
  res = alloc_clocks(g, max_clocks, why, why_len);
  if (!res) res = run_clocks(g, why, why_len);
  for (int round = 0; !res && round < 16; round++) { /* counters several blocks increment */
    long added = rg_refine(g);
    if (added <= 0) {
      res = added < 0 ? -1 : 0;
      break;
    }
    reset_clocks(g), res = run_clocks(g, why, why_len);
  }
  return ran_out(g, max_clocks, why, why_len) ? 1 : res;
}

void rg_free(struct rg_graph* g) {
  for (int t = 0; g->vc && t < g->nthreads; t++) free(g->vc[t]);
  for (int t = 0; g->pred_at && t < g->nthreads; t++) free(g->pred_at[t]);
  for (size_t k = 0; k < g->nproxies; k++) free(g->proxies[k].src);
  for (size_t k = 0; k < g->ngroups; k++) free(g->groups[k].inc), free(g->groups[k].wt);
  free(g->vc), free(g->pred_at), free(g->done), free(g->rank_of), free(g->first_thread), free(g->blk);
  free(g->preds), free(g->el.e), free(g->groups), free(g->proxies), free(g->per_call);
  memset(g, 0, sizeof(*g));
}
