/* port.c - port channels in the order check (plan/order/order.h): a block's puts and signals on a port
 * channel are done later, in order, by the proxy; each port channel a block drives gets a proxy
 * thread whose events are those transfers and signals. */
#include <stdio.h>
#include <stdlib.h>

#include "plan/load/lower.h"
#include "plan/order/edges.h"
#include "util/vec.h"

int rg_port_async(const struct plan_op* op) {
  int c = op->code;
  return op->chan_type == PLAN_CH_PORT &&
         (c == PLAN_OP_PUT || c == PLAN_OP_PWS || c == PLAN_OP_SIGNAL || c == PLAN_OP_RLXSIGNAL);
}

/* The proxy of (rank, peer, ord), or -1 (also when the check's budget is spent). */
static int proxy_of(struct rg_graph* g, int rank, const struct plan_chanref* ch) {
  if (rg_spend(g, g->nproxies + 1)) return -1;
  for (size_t k = 0; k < g->nproxies; k++)
    if (g->proxies[k].rank == rank && g->proxies[k].peer == ch->peer && g->proxies[k].ord == ch->ord) return (int)k;
  return -1;
}

/* Appends op i of block thread t to the proxy of its channel ch (made on first use); 1 when
 * another block drives that channel. */
static int proxy_add(struct rg_graph* g, int t, uint32_t i, const struct plan_chanref* ch, char* why, size_t why_len) {
  int r = g->rank_of[t], k = proxy_of(g, r, ch);
  if (g->over) return 1; /* rg_build says why */
  if (k < 0) {
    if (vec_reserve((void**)&g->proxies, &g->capproxies, g->nproxies + 1, sizeof(*g->proxies))) return -1;
    k = (int)g->nproxies++;
    g->proxies[k] = (struct rg_proxy){.rank = r, .peer = ch->peer, .ord = ch->ord, .block = t};
  }
  struct rg_proxy* x = &g->proxies[k];
  if (x->block != t) {
    snprintf(why, why_len, "port channel %d from gpu %d to gpu %d is driven by more than one threadblock", ch->ord, r,
             ch->peer);
    return 1;
  }
  if (vec_reserve((void**)&x->src, &x->cap, x->n + 1, sizeof(*x->src))) return -1;
  x->src[x->n++] = (struct rg_pred){t, i};
  return 0;
}

int rg_find_proxies(struct rg_graph* g, char* why, size_t why_len) {
  for (int t = 0; t < g->nblock_threads; t++)
    for (uint32_t i = 0; i < g->blk[t]->nops; i++) {
      const struct plan_op* op = &g->blk[t]->ops[i];
      for (uint16_t c = 0; rg_port_async(op) && c < op->nchan; c++) {
        int res = proxy_add(g, t, i, &g->blk[t]->chans[op->first_chan + c], why, why_len);
        if (res) return res;
      }
    }
  return 0;
}

int rg_proxy_event(struct rg_graph* g, int t, uint32_t i, const struct plan_chanref* ch, int* pt, uint32_t* k) {
  int x = proxy_of(g, g->rank_of[t], ch);
  if (x < 0) return -1;
  const struct rg_proxy* q = &g->proxies[x];
  if (rg_spend(g, q->n)) return -1;
  for (size_t e = 0; e < q->n; e++)
    if (q->src[e].t == t && q->src[e].i == i) {
      *pt = g->first_proxy + x, *k = (uint32_t)e;
      return 0;
    }
  return -1;
}

/* Op i of block thread t (a flush, or pwsf) after the latest event of ch's proxy from an op
 * before it. */
static int flush_edge(struct rg_graph* g, int t, uint32_t i, const struct plan_chanref* ch) {
  int x = proxy_of(g, g->rank_of[t], ch);
  if (x < 0) return g->over ? -1 : 0;
  const struct rg_proxy* q = &g->proxies[x];
  size_t e = q->n;
  if (rg_spend(g, q->n)) return -1;
  while (e > 0 && q->src[e - 1].i >= i) e--;
  return e > 0 ? rg_add_edge(&g->el, t, i, g->first_proxy + x, (uint32_t)(e - 1)) : 0;
}

int rg_port_edges(struct rg_graph* g) {
  for (size_t x = 0; x < g->nproxies; x++)
    for (size_t e = 0; e < g->proxies[x].n; e++) {
      struct rg_pred s = g->proxies[x].src[e];
      if (rg_add_edge(&g->el, g->first_proxy + (int)x, (uint32_t)e, s.t, s.i)) return -1;
    }
  for (int t = 0; t < g->nblock_threads; t++)
    for (uint32_t i = 0; i < g->blk[t]->nops; i++) {
      const struct plan_op* op = &g->blk[t]->ops[i];
      if (op->chan_type != PLAN_CH_PORT || (op->code != PLAN_OP_FLUSH && op->code != PLAN_OP_PWSF)) continue;
      for (uint16_t c = 0; c < op->nchan; c++)
        if (flush_edge(g, t, i, &g->blk[t]->chans[op->first_chan + c])) return -1;
    }
  return 0;
}

struct rg_pred rg_event_op(const struct rg_graph* g, int t, uint32_t i) {
  if (t >= g->first_proxy) return g->proxies[t - g->first_proxy].src[i];
  return (struct rg_pred){t, i};
}
