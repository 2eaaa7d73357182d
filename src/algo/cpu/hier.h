/* hier.h - the hierarchical CPU algorithms (hier_*.c): for communicators whose ranks span several
 * hosts, data moves inside a host over shm and crosses hosts only between chosen ranks, so each
 * byte crosses a host boundary as few times as the collective allows.
 *
 * Layout: hosts are numbered in the order of their lowest rank; a rank's local index is its place
 * among its host's ranks in rank order. Hosts may differ in size: every algorithm serves any
 * layout (ranks of a larger host beyond the smallest host's size take no part in the cross-host
 * steps of allreduce; in allgather, reducescatter and alltoall rank l of host h pairs with local index
 * l mod size(g) on host g).
 *
 * Every algorithm is a sequence of steps that every rank runs in the same order; in a step a rank
 * sends at most one chunk per pipe and then receives and acknowledges what the step brings it (a
 * reducer may send its result, reduced straight into the send slot, and alltoall's carrier its
 * bundles, before acknowledging their inputs: that send waits only for an ack two chunks back on its pipe, which the receiver gave in
 * an earlier step). This is net.h's deadlock-freedom rule, kept for uneven hosts too. */
#ifndef MPP_ALGO_CPU_HIER_H_
#define MPP_ALGO_CPU_HIER_H_

#include "algo/cpu/net.h"

struct cpu_hier {
  int nhosts;
  int kmin;     /* ranks of the smallest host */
  int* host_of; /* nranks: host index of each rank */
  int* local_of; /* nranks: local index of each rank */
  int* first;   /* nhosts + 1: host h's ranks are members[first[h] .. first[h+1]) */
  int* members; /* nranks: ranks grouped by host, each host's in rank order */
};

/* The layout of ac's communicator, made on first use (from every peer's host hash; no
 * communication) and kept in ac->hier until teardown. */
mscclppResult_t cpu_hier_get(struct algo_comm* ac, const struct cpu_hier** out);
/* The number of hosts of the communicator's ranks (for the selection table); -1: out of memory. */
int cpu_hier_count_hosts(const struct algo_comm* ac);
void cpu_hier_free(struct cpu_hier* h);

static inline int hier_size(const struct cpu_hier* x, int h) { return x->first[h + 1] - x->first[h]; }
static inline int hier_rank(const struct cpu_hier* x, int h, int l) { return x->members[x->first[h] + l]; }
/* Broadcast's leader of host h for root: the rank whose local index is the root's modulo h's size
 * (the root on its own host). */
static inline int cpu_hier_leader(const struct cpu_hier* x, int h, int root) {
  return hier_rank(x, h, x->local_of[root] % hier_size(x, h));
}

/* The prologue of every hierarchical collective: the network, net->coll set, and the pipes these
 * algorithms use connected (every peer of the own host, each remote rank whose local index is this
 * rank's modulo its host's size or the other way round, and for a broadcast the other hosts'
 * leaders when this rank leads its host), in increasing peer order. */
mscclppResult_t cpu_hier_begin(struct algo_comm* ac, const struct algo_args* a, struct cpu_net** net,
                               const struct cpu_hier** hier);

/* The two operators of a reduction done in two levels: `first` combines the inputs of one host
 * (premulsum scales each input by its owner's scalar; avg only sums), `second` combines the hosts'
 * partial results (premulsum: a plain sum; avg: the sum divided by the number of ranks). */
void cpu_hier_ops(enum elem_op op, enum elem_op* first, enum elem_op* second);

mscclppResult_t cpu_allreduce_hier(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t cpu_allgather_hier(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t cpu_reducescatter_hier(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t cpu_broadcast_hier(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t cpu_alltoall_hier(struct algo_comm* ac, const struct algo_args* a);

#endif /* MPP_ALGO_CPU_HIER_H_ */
