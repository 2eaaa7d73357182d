/* hier_allreduce.c - allreduce across hosts (see hier.h): per super-chunk of K * chunk elements
 * (K: ranks of the smallest host), split in K slices, slice j owned by local rank j of every host:
 *   1. inside each host, every rank sends slice j to local rank j, which reduces the host's inputs
 *      (local order; premulsum scales, avg only sums);
 *   2. across hosts, the owners of slice j (one per host) reduce-scatter it: sub-slice g goes to
 *      host g's owner, which reduces the hosts' partials in host order (avg divides here);
 *   3. across hosts, the owners allgather the reduced sub-slices;
 *   4. inside each host, local rank j sends slice j to every other local rank.
 * Local ranks >= K of a larger host take part in steps 1 and 4 only. */
#include "algo/cpu/hier.h"
#include "elem/reduce.h"
#include "util/err.h"

/* One allreduce call's fixed facts. */
struct ar {
  struct cpu_net* net;
  const struct cpu_hier* x;
  const struct algo_args* a;
  int h, l, L, K;
  enum elem_op op1, op2;
};

static char* at(const struct ar* c, const void* buf, size_t elem) { return (char*)buf + elem * c->a->es; }

/* Step 1: slice p to local rank p (p < K); local rank l < K reduces its slice into recv. */
static mscclppResult_t intra_reduce(struct ar* c, size_t base, size_t len) {
  struct cpu_net* net = c->net;
  size_t off, cnt;
  for (int k = 1; k < c->L; k++) {
    int p = (c->l + k) % c->L;
    cpu_slice(len, c->K, p, &off, &cnt);
    if (p >= c->K || cnt == 0) continue;
    struct chunk_hdr hd = cpu_hdr(c->a, (base + off) * c->a->es, cnt * c->a->es);
    MPP_CHECK(cpu_send(net, &net->pipes[hier_rank(c->x, c->h, p)], &hd, at(c, c->a->send, base + off)));
  }
  if (c->l >= c->K) return mscclppSuccess;
  cpu_slice(len, c->K, c->l, &off, &cnt);
  if (cnt == 0) return mscclppSuccess;
  struct chunk_hdr want = cpu_hdr(c->a, (base + off) * c->a->es, cnt * c->a->es);
  for (int p = 0; p < c->L; p++) {
    if (p == c->l) {
      net->srcs[p] = at(c, c->a->send, base + off);
      net->scalars[p] = c->a->scalar;
      continue;
    }
    const struct chunk_hdr* got;
    MPP_CHECK(cpu_recv(net, &net->pipes[hier_rank(c->x, c->h, p)], &want, &got));
    net->srcs[p] = chunk_data(got);
    net->scalars[p] = got->scalar;
  }
  elem_reduce(at(c, c->a->recv, base + off), net->srcs, c->L, cnt, c->a->dtype, c->op1, c->net->ac->nranks, net->scalars);
  for (int p = 0; p < c->L; p++)
    if (p != c->l) MPP_CHECK(cpu_recv_done(net, &net->pipes[hier_rank(c->x, c->h, p)]));
  return mscclppSuccess;
}

/* Steps 2 and 3 for the owner of slice [so, so + sn) of recv. */
static mscclppResult_t cross_allreduce(struct ar* c, size_t so, size_t sn) {
  struct cpu_net* net = c->net;
  int H = c->x->nhosts;
  size_t off, cnt;
  for (int k = 1; k < H; k++) { /* reduce-scatter: sub-slice g to host g */
    int g = (c->h + k) % H;
    cpu_slice(sn, H, g, &off, &cnt);
    if (cnt == 0) continue;
    struct chunk_hdr hd = cpu_hdr(c->a, (so + off) * c->a->es, cnt * c->a->es);
    MPP_CHECK(cpu_send(net, &net->pipes[hier_rank(c->x, g, c->l)], &hd, at(c, c->a->recv, so + off)));
  }
  cpu_slice(sn, H, c->h, &off, &cnt);
  if (cnt > 0) { /* avg's division happens here even on one host */
    struct chunk_hdr want = cpu_hdr(c->a, (so + off) * c->a->es, cnt * c->a->es);
    for (int g = 0; g < H; g++) {
      const struct chunk_hdr* got;
      if (g == c->h) {
        net->srcs[g] = at(c, c->a->recv, so + off);
        continue;
      }
      MPP_CHECK(cpu_recv(net, &net->pipes[hier_rank(c->x, g, c->l)], &want, &got));
      net->srcs[g] = chunk_data(got);
    }
    elem_reduce(at(c, c->a->recv, so + off), net->srcs, H, cnt, c->a->dtype, c->op2, net->ac->nranks, net->scalars);
    for (int g = 0; g < H; g++)
      if (g != c->h) MPP_CHECK(cpu_recv_done(net, &net->pipes[hier_rank(c->x, g, c->l)]));
    struct chunk_hdr hd = cpu_hdr(c->a, (so + off) * c->a->es, cnt * c->a->es);
    for (int k = 1; k < H; k++) /* allgather: the reduced sub-slice to every host */
      MPP_CHECK(cpu_send(net, &net->pipes[hier_rank(c->x, (c->h + k) % H, c->l)], &hd, at(c, c->a->recv, so + off)));
  }
  for (int k = 1; k < H; k++) {
    int g = (c->h + k) % H;
    cpu_slice(sn, H, g, &off, &cnt);
    if (cnt > 0) MPP_CHECK(cpu_recv_copy(net, c->a, hier_rank(c->x, g, c->l), so + off, cnt));
  }
  return mscclppSuccess;
}

/* Step 4: the owner sends its slice to the other local ranks; every rank receives the others'. */
static mscclppResult_t intra_gather(struct ar* c, size_t base, size_t len) {
  size_t off, cnt;
  if (c->l < c->K) {
    cpu_slice(len, c->K, c->l, &off, &cnt);
    struct chunk_hdr hd = cpu_hdr(c->a, (base + off) * c->a->es, cnt * c->a->es);
    for (int k = 1; k < c->L && cnt > 0; k++)
      MPP_CHECK(cpu_send(c->net, &c->net->pipes[hier_rank(c->x, c->h, (c->l + k) % c->L)], &hd, at(c, c->a->recv, base + off)));
  }
  for (int p = 0; p < c->K; p++) {
    cpu_slice(len, c->K, p, &off, &cnt);
    if (p != c->l && cnt > 0) MPP_CHECK(cpu_recv_copy(c->net, c->a, hier_rank(c->x, c->h, p), base + off, cnt));
  }
  return mscclppSuccess;
}

mscclppResult_t cpu_allreduce_hier(struct algo_comm* ac, const struct algo_args* a) {
  struct ar c = {.a = a};
  MPP_CHECK(cpu_hier_begin(ac, a, &c.net, &c.x));
  c.h = c.x->host_of[ac->rank];
  c.l = c.x->local_of[ac->rank];
  c.L = hier_size(c.x, c.h);
  c.K = c.x->kmin;
  cpu_hier_ops(a->op, &c.op1, &c.op2);
  size_t step = (c.net->chunk / a->es) * (size_t)c.K;
  for (size_t base = 0; base < a->count; base += step) {
    size_t len = min_size(step, a->count - base), off, cnt;
    MPP_CHECK(intra_reduce(&c, base, len));
    cpu_slice(len, c.K, c.l, &off, &cnt);
    if (c.l < c.K && cnt > 0) MPP_CHECK(cross_allreduce(&c, base + off, cnt));
    MPP_CHECK(intra_gather(&c, base, len));
  }
  return mscclppSuccess;
}
