/* hier_reducescatter.c - reducescatter across hosts (see hier.h). Per chunk of the blocks, one
 * round per destination rank r (of host g, local index m), two steps each:
 *   1. inside every host h, every rank sends its chunk of block r to the host's reducer for r,
 *      local rank m mod size(h) (on host g: r itself), which reduces the host's inputs (local
 *      order; premulsum scales, avg only sums); a reducer of another host than r's reduces straight
 *      into its send slot to r;
 *   2. r reduces the hosts' partial results in host order (avg divides here) into its output.
 * Each block's partial crosses from each other host once. */
#include "algo/cpu/hier.h"
#include "elem/reduce.h"
#include "util/err.h"

struct rs {
  struct cpu_net* net;
  const struct cpu_hier* x;
  const struct algo_args* a;
  int me, h, l, L;
  enum elem_op op1, op2;
};

/* Step 1 at the reducer of host h for destination r: gathers the host's inputs (left
 * unacknowledged) into net->srcs / net->scalars in local order. */
static mscclppResult_t gather_host(struct rs* c, const struct chunk_hdr* want, const char* own) {
  struct cpu_net* net = c->net;
  for (int p = 0; p < c->L; p++) {
    const struct chunk_hdr* got;
    if (p == c->l) {
      net->srcs[p] = own;
      net->scalars[p] = c->a->scalar;
      continue;
    }
    MPP_CHECK(cpu_recv(net, &net->pipes[hier_rank(c->x, c->h, p)], want, &got));
    net->srcs[p] = chunk_data(got);
    net->scalars[p] = got->scalar;
  }
  return mscclppSuccess;
}

static mscclppResult_t ack_host(struct rs* c) {
  for (int p = 0; p < c->L; p++)
    if (p != c->l) MPP_CHECK(cpu_recv_done(c->net, &c->net->pipes[hier_rank(c->x, c->h, p)]));
  return mscclppSuccess;
}

/* Step 2 at r: the partials of the other hosts' reducers, with its own (in recv) at place h. */
static mscclppResult_t reduce_hosts(struct rs* c, const struct chunk_hdr* want, char* out, size_t len) {
  struct cpu_net* net = c->net;
  int H = c->x->nhosts, m = c->l;
  for (int g = 0; g < H; g++) {
    const struct chunk_hdr* got;
    if (g == c->h) {
      net->srcs[g] = out;
      continue;
    }
    MPP_CHECK(cpu_recv(net, &net->pipes[hier_rank(c->x, g, m % hier_size(c->x, g))], want, &got));
    net->srcs[g] = chunk_data(got);
  }
  elem_reduce(out, net->srcs, H, len, c->a->dtype, c->op2, net->ac->nranks, net->scalars);
  for (int g = 0; g < H; g++)
    if (g != c->h) MPP_CHECK(cpu_recv_done(net, &net->pipes[hier_rank(c->x, g, m % hier_size(c->x, g))]));
  return mscclppSuccess;
}

/* The round of destination r over chunk [base, base + len) of the blocks. */
static mscclppResult_t round_for(struct rs* c, int r, size_t base, size_t len) {
  struct cpu_net* net = c->net;
  const struct algo_args* a = c->a;
  int g = c->x->host_of[r], m = c->x->local_of[r];
  int reducer = m % c->L; /* local index of this host's reducer for r */
  const char* in = (const char*)a->send + ((size_t)r * a->count + base) * a->es;
  struct chunk_hdr hd = cpu_hdr(a, ((size_t)r * a->count + base) * a->es, len * a->es);
  if (c->l != reducer) return cpu_send(net, &net->pipes[hier_rank(c->x, c->h, reducer)], &hd, in);
  MPP_CHECK(gather_host(c, &hd, in));
  if (g == c->h) { /* this rank is r: its host's partial goes to its output */
    char* out = (char*)a->recv + base * a->es;
    elem_reduce(out, net->srcs, c->L, len, a->dtype, c->op1, net->ac->nranks, net->scalars);
    MPP_CHECK(ack_host(c));
    return reduce_hosts(c, &hd, out, len);
  }
  void* slot;
  struct cpu_pipe* p = &net->pipes[r];
  MPP_CHECK(cpu_send_begin(net, p, &slot));
  elem_reduce(slot, net->srcs, c->L, len, a->dtype, c->op1, net->ac->nranks, net->scalars);
  MPP_CHECK(ack_host(c));
  return cpu_send_commit(net, p, &hd);
}

mscclppResult_t cpu_reducescatter_hier(struct algo_comm* ac, const struct algo_args* a) {
  struct rs c = {.a = a, .me = ac->rank};
  MPP_CHECK(cpu_hier_begin(ac, a, &c.net, &c.x));
  c.h = c.x->host_of[c.me];
  c.l = c.x->local_of[c.me];
  c.L = hier_size(c.x, c.h);
  cpu_hier_ops(a->op, &c.op1, &c.op2);
  size_t step = c.net->chunk / a->es;
  for (size_t base = 0; base < a->count; base += step) {
    size_t len = min_size(step, a->count - base);
    for (int r = 0; r < ac->nranks; r++) MPP_CHECK(round_for(&c, r, base, len));
  }
  return mscclppSuccess;
}
