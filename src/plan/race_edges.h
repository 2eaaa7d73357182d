/* race_edges.h - the same-call edges of the order check's graph (race_edges.c) and the byte spans
 * of buffer references that the edges and the access check (race.c) compare. */
#ifndef MPP_PLAN_RACE_EDGES_H_
#define MPP_PLAN_RACE_EDGES_H_

#include "plan/race.h"

/* Span of a reference in its owner's buffer, in chunks (scratch: in data slots, a packet chunk k
 * covering [2k, 2k + 2)), narrowed to the op's tbg slice. */
struct rg_span {
  double lo, hi;
};
struct rg_span rg_ref_span(const struct plan_op* op, const struct plan_ref* ref, int packet);
/* The ranks whose buffer a reference of rank r names (a switch reference: the whole group);
 * returns how many were put in out (at most max). */
int rg_ref_owners(const struct mscclppPlan* p, int r, const struct plan_ref* ref, int* out, int max);

/* Fills g->preds / g->pred_at: signals to waits, barriers, semaphores, packet writes to reads.
 * 0, or 1 (the analysis does not apply), 2 (a wait can never be satisfied), -1 (no memory), with
 * why filled for 1 and 2. */
int rg_edges(struct rg_graph* g, char* why, size_t why_len);
/* With the clocks of the current edges: adds, for every group, each wait's edge from an increment
 * that it must have seen because too few others can come before it without that one. Returns how
 * many edges it added (laid out again), or -1 when out of memory. */
long rg_refine(struct rg_graph* g);

#endif /* MPP_PLAN_RACE_EDGES_H_ */
