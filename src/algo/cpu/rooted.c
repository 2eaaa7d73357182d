/* rooted.c - broadcast and reduce on CPU ranks.
 *
 * cpu_broadcast_scatter_ag: super-chunks of (n-1) * chunk elements, split into n-1 slices, one per
 * non-root rank. Scatter step: the root sends slice i to the i-th non-root rank. Allgather step:
 * every non-root rank sends its slice to every other non-root rank. The root sends the message
 * once and every rank receives it once, instead of the root sending it n-1 times.
 *
 * cpu_reduce_rs_gather: the reduce-scatter step of allreduce (each rank reduces its slice from every
 * rank's input, in rank order, so reduce and allreduce give the same bits), then the slices go to
 * the root. Over shm a non-root rank reduces straight into the root's inbox. Its send to the root
 * waits only for the root's ack of the previous super-chunk's slice, which the root gives before
 * it can need anything of this super-chunk. */
#include <string.h>

#include "algo/cpu/net.h"
#include "elem/reduce.h"
#include "util/err.h"

/* Index of non-root rank r among the non-root ranks, counting from root + 1. */
static inline int nonroot_index(int r, int root, int n) { return (r - root - 1 + n) % n; }

/* Root: sends slice i of [base, base+len) to the i-th non-root rank. Others: receive their slice. */
static mscclppResult_t bcast_scatter(struct cpu_net* net, const struct algo_args* a, size_t base, size_t len) {
  int n = net->ac->nranks, me = net->ac->rank, root = a->root;
  size_t off, cnt;
  if (me == root) {
    for (int k = 1; k < n; k++) {
      int q = (me + k) % n;
      cpu_slice(len, n - 1, nonroot_index(q, root, n), &off, &cnt);
      if (cnt == 0) continue;
      struct chunk_hdr h = cpu_hdr(a, (base + off) * a->es, cnt * a->es);
      MPP_CHECK(cpu_send(net, &net->pipes[q], &h, (const char*)a->send + (base + off) * a->es));
    }
    return mscclppSuccess;
  }
  cpu_slice(len, n - 1, nonroot_index(me, root, n), &off, &cnt);
  if (cnt == 0) return mscclppSuccess;
  return cpu_recv_copy(net, a, root, base + off, cnt);
}

/* Non-root ranks: exchange their slices among themselves. */
static mscclppResult_t bcast_allgather(struct cpu_net* net, const struct algo_args* a, size_t base, size_t len) {
  int n = net->ac->nranks, me = net->ac->rank, root = a->root;
  size_t off, cnt;
  cpu_slice(len, n - 1, nonroot_index(me, root, n), &off, &cnt);
  if (cnt > 0) {
    struct chunk_hdr h = cpu_hdr(a, (base + off) * a->es, cnt * a->es);
    for (int k = 1; k < n; k++) {
      int q = (me + k) % n;
      if (q != root) MPP_CHECK(cpu_send(net, &net->pipes[q], &h, (const char*)a->recv + (base + off) * a->es));
    }
  }
  for (int k = 1; k < n; k++) {
    int q = (me + k) % n;
    if (q == root) continue;
    cpu_slice(len, n - 1, nonroot_index(q, root, n), &off, &cnt);
    if (cnt == 0) continue;
    MPP_CHECK(cpu_recv_copy(net, a, q, base + off, cnt));
  }
  return mscclppSuccess;
}

mscclppResult_t cpu_broadcast_scatter_ag(struct algo_comm* ac, const struct algo_args* a) {
  struct cpu_net* net;
  MPP_CHECK(cpu_begin(ac, a, &net));
  int n = ac->nranks;
  if (ac->rank == a->root && a->send != a->recv) memcpy(a->recv, a->send, a->count * a->es);
  if (n == 1) return mscclppSuccess;
  size_t step = (net->chunk / a->es) * (size_t)(n - 1);
  for (size_t base = 0; base < a->count; base += step) {
    size_t len = min_size(step, a->count - base);
    MPP_CHECK(bcast_scatter(net, a, base, len));
    if (ac->rank != a->root) MPP_CHECK(bcast_allgather(net, a, base, len));
  }
  return mscclppSuccess;
}

/* Root: receives every other rank's reduced slice into recv. */
static mscclppResult_t reduce_gather(struct cpu_net* net, const struct algo_args* a, size_t base, size_t len) {
  int n = net->ac->nranks, me = net->ac->rank;
  for (int k = 1; k < n; k++) {
    int q = (me + k) % n;
    size_t off, cnt;
    cpu_slice(len, n, q, &off, &cnt);
    if (cnt == 0) continue;
    MPP_CHECK(cpu_recv_copy(net, a, q, base + off, cnt));
  }
  return mscclppSuccess;
}

/* Reduces this rank's slice (inputs gathered in net->srcs): into recv on the root, else into the
 * pipe to the root, which it then sends. */
static mscclppResult_t reduce_slice(struct cpu_net* net, const struct algo_args* a, size_t at, size_t cnt) {
  int n = net->ac->nranks;
  if (net->ac->rank == a->root) {
    elem_reduce((char*)a->recv + at, net->srcs, n, cnt, a->dtype, a->op, n, net->scalars);
    return cpu_done_all(net);
  }
  struct cpu_pipe* p = &net->pipes[a->root];
  void* dst;
  MPP_CHECK(cpu_send_begin(net, p, &dst));
  elem_reduce(dst, net->srcs, n, cnt, a->dtype, a->op, n, net->scalars);
  MPP_CHECK(cpu_done_all(net));
  struct chunk_hdr h = cpu_hdr(a, at, cnt * a->es);
  return cpu_send_commit(net, p, &h);
}

mscclppResult_t cpu_reduce_rs_gather(struct algo_comm* ac, const struct algo_args* a) {
  struct cpu_net* net;
  MPP_CHECK(cpu_begin(ac, a, &net));
  size_t step = (net->chunk / a->es) * (size_t)ac->nranks;
  for (size_t base = 0; base < a->count; base += step) {
    size_t len = min_size(step, a->count - base), off, cnt;
    MPP_CHECK(cpu_rs_send(net, a, base, len));
    MPP_CHECK(cpu_rs_gather_inputs(net, a, base, len, &off, &cnt));
    if (cnt > 0) MPP_CHECK(reduce_slice(net, a, (base + off) * a->es, cnt));
    if (ac->rank == a->root) MPP_CHECK(reduce_gather(net, a, base, len));
  }
  return mscclppSuccess;
}
