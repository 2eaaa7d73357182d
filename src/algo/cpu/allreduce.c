/* allreduce.c - allreduce on CPU ranks, and the two steps it shares with reduce.
 *
 * cpu_allreduce_rsag (bandwidth): the message goes in super-chunks of nranks * chunk elements,
 * each split into nranks slices. Reduce-scatter step: every rank sends slice q of its input to
 * rank q and reduces its own slice from every rank's (in rank order, so the result does not depend
 * on which rank computes it). Allgather step: every rank sends its reduced slice to every other.
 * Each rank receives 2 (n-1)/n of the message.
 *
 * cpu_allreduce_allpairs (latency): one step per chunk: every rank sends its whole chunk to every
 * other and reduces all n in rank order itself; every rank computes the same bits. Each rank
 * receives (n-1) times the message, so it is for small messages only. */
#include <string.h>

#include "algo/cpu/net.h"
#include "elem/reduce.h"
#include "util/err.h"

/* Sends slice q (of nranks slices of [base, base+len)) of the input to every rank q. */
mscclppResult_t cpu_rs_send(struct cpu_net* net, const struct algo_args* a, size_t base, size_t len) {
  int n = net->ac->nranks, me = net->ac->rank;
  for (int k = 1; k < n; k++) {
    int q = (me + k) % n;
    size_t off, cnt;
    cpu_slice(len, n, q, &off, &cnt);
    if (cnt == 0) continue;
    struct chunk_hdr h = cpu_hdr(a, (base + off) * a->es, cnt * a->es);
    MPP_CHECK(cpu_send(net, &net->pipes[q], &h, (const char*)a->send + (base + off) * a->es));
  }
  return mscclppSuccess;
}

/* Receives this rank's slice from every other rank (leaving them unacknowledged) and fills
 * net->srcs / net->scalars in rank order; *cnt is the slice's element count (0: nothing to do). */
mscclppResult_t cpu_rs_gather_inputs(struct cpu_net* net, const struct algo_args* a, size_t base, size_t len, size_t* off,
                                     size_t* cnt) {
  int n = net->ac->nranks, me = net->ac->rank;
  cpu_slice(len, n, me, off, cnt);
  if (*cnt == 0) return mscclppSuccess;
  net->srcs[me] = (const char*)a->send + (base + *off) * a->es;
  net->scalars[me] = a->scalar;
  struct chunk_hdr want = cpu_hdr(a, (base + *off) * a->es, *cnt * a->es);
  for (int k = 1; k < n; k++) {
    int q = (me + k) % n;
    const struct chunk_hdr* h;
    MPP_CHECK(cpu_recv(net, &net->pipes[q], &want, &h));
    net->srcs[q] = chunk_data(h);
    net->scalars[q] = h->scalar;
  }
  return mscclppSuccess;
}

/* Acknowledges the chunk of every other rank. */
mscclppResult_t cpu_done_all(struct cpu_net* net) {
  int n = net->ac->nranks, me = net->ac->rank;
  for (int k = 1; k < n; k++) MPP_CHECK(cpu_recv_done(net, &net->pipes[(me + k) % n]));
  return mscclppSuccess;
}

static void reduce_into(struct cpu_net* net, const struct algo_args* a, void* dst, size_t cnt) {
  elem_reduce(dst, net->srcs, net->ac->nranks, cnt, a->dtype, a->op, net->ac->nranks, net->scalars);
}

/* Sends this rank's reduced slice of recv to every rank and copies every other slice in. */
static mscclppResult_t ag_step(struct cpu_net* net, const struct algo_args* a, size_t base, size_t len) {
  int n = net->ac->nranks, me = net->ac->rank;
  size_t off, cnt;
  cpu_slice(len, n, me, &off, &cnt);
  if (cnt > 0) {
    struct chunk_hdr h = cpu_hdr(a, (base + off) * a->es, cnt * a->es);
    for (int k = 1; k < n; k++)
      MPP_CHECK(cpu_send(net, &net->pipes[(me + k) % n], &h, (const char*)a->recv + (base + off) * a->es));
  }
  for (int k = 1; k < n; k++) {
    int q = (me + k) % n;
    cpu_slice(len, n, q, &off, &cnt);
    if (cnt == 0) continue;
    MPP_CHECK(cpu_recv_copy(net, a, q, base + off, cnt));
  }
  return mscclppSuccess;
}

mscclppResult_t cpu_allreduce_rsag(struct algo_comm* ac, const struct algo_args* a) {
  struct cpu_net* net;
  MPP_CHECK(cpu_begin(ac, a, &net));
  size_t step = (net->chunk / a->es) * (size_t)ac->nranks;
  for (size_t base = 0; base < a->count; base += step) {
    size_t len = min_size(step, a->count - base), off, cnt;
    MPP_CHECK(cpu_rs_send(net, a, base, len));
    MPP_CHECK(cpu_rs_gather_inputs(net, a, base, len, &off, &cnt));
    if (cnt > 0) {
      reduce_into(net, a, (char*)a->recv + (base + off) * a->es, cnt);
      MPP_CHECK(cpu_done_all(net));
    }
    MPP_CHECK(ag_step(net, a, base, len));
  }
  return mscclppSuccess;
}

mscclppResult_t cpu_allreduce_allpairs(struct algo_comm* ac, const struct algo_args* a) {
  struct cpu_net* net;
  MPP_CHECK(cpu_begin(ac, a, &net));
  int n = ac->nranks, me = ac->rank;
  size_t step = net->chunk / a->es;
  for (size_t base = 0; base < a->count; base += step) {
    size_t len = min_size(step, a->count - base);
    const char* in = (const char*)a->send + base * a->es;
    struct chunk_hdr h = cpu_hdr(a, base * a->es, len * a->es);
    for (int k = 1; k < n; k++) MPP_CHECK(cpu_send(net, &net->pipes[(me + k) % n], &h, in));
    net->srcs[me] = in;
    net->scalars[me] = a->scalar;
    for (int k = 1; k < n; k++) {
      int q = (me + k) % n;
      const struct chunk_hdr* got;
      MPP_CHECK(cpu_recv(net, &net->pipes[q], &h, &got));
      net->srcs[q] = chunk_data(got);
      net->scalars[q] = got->scalar;
    }
    reduce_into(net, a, (char*)a->recv + base * a->es, len);
    MPP_CHECK(cpu_done_all(net));
  }
  return mscclppSuccess;
}
