/* edges.h - the same-call edges of the order check's graph (plan/order/edges.c) and the byte spans
 * of buffer references that the edges and the access check (plan/order/access.c) compare. */
#ifndef MPP_PLAN_ORDER_EDGES_H_
#define MPP_PLAN_ORDER_EDGES_H_

#include "plan/order/order.h"

/* Span of a reference in its owner's buffer, in chunks (scratch: in data slots, a packet chunk k
 * covering [2k, 2k + 2)), narrowed to the op's tbg slice. */
struct rg_span {
  double lo, hi;
};
struct rg_span rg_ref_span(const struct plan_op* op, const struct plan_ref* ref, int packet);
/* The ranks whose buffer a reference of rank r names (a switch reference: the whole group);
 * returns how many were put in out (at most max). */
int rg_ref_owners(const struct mscclppPlan* p, int r, const struct plan_ref* ref, int* out, int max);

/* Port channels (plan/order/port.c). Finds the proxies (g->proxies); 1 (why filled) when a port channel
 * is driven by more than one block, -1 out of memory. */
int rg_find_proxies(struct rg_graph* g, char* why, size_t why_len);
/* Whether op moves or signals through its port channels asynchronously (put, pws, signal,
 * rlxsignal on port channels: done by the proxy later). */
int rg_port_async(const struct plan_op* op);
/* The proxy event (thread in *pt, index in *k) of op i of block thread t on its port channel
 * ch; 0, or -1 when there is none. */
int rg_proxy_event(struct rg_graph* g, int t, uint32_t i, const struct plan_chanref* ch, int* pt, uint32_t* k);
/* Edges: every proxy event after the op that triggered it; every flush/pwsf after the latest
 * earlier event of its channels' proxies. 0 or -1. */
int rg_port_edges(struct rg_graph* g);
/* The op behind an event of a block or proxy thread. */
struct rg_pred rg_event_op(const struct rg_graph* g, int t, uint32_t i);

/* Fills g->preds / g->pred_at: signals to waits, barriers, semaphores, packet writes to reads.
 * 0, or 1 (the analysis does not apply), 2 (a wait can never be satisfied), -1 (no memory), with
 * why filled for 1 and 2. */
int rg_edges(struct rg_graph* g, char* why, size_t why_len);
int rg_add_edge(struct rg_edges* l, int t, uint32_t i, int ft, uint32_t fi);
/* With the clocks of the current edges: adds, for every group, each wait's edge from an increment
 * that it must have seen because too few others can come before it without that one. Returns how
 * many edges it added (laid out again), or -1 when out of memory. */
long rg_refine(struct rg_graph* g);

#endif /* MPP_PLAN_ORDER_EDGES_H_ */
