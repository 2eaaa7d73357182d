/* hier_allgather.c - allgather across hosts (see hier.h), per chunk of every block:
 *   A. across hosts: rank (h, l) sends its chunk to rank (g, l mod size(g)) of every other host g,
 *      so every block reaches exactly one rank of every other host;
 *   B. inside each host, in rounds: a rank's items are its own block followed by the remote blocks
 *      it received in A (host order, then local order); in round t every rank sends its item t (if
 *      it has one) to every other local rank, and receives item t of every local rank that has one.
 * Each block crosses to each other host once; inside a host every block is copied to every rank. */
#include <string.h>

#include "algo/cpu/hier.h"
#include "util/err.h"

/* The rank whose block is item t of local rank m of host h, or -1 when it has fewer items. */
static int item_rank(const struct cpu_hier* x, int h, int m, int t) {
  if (t == 0) return hier_rank(x, h, m);
  int L = hier_size(x, h);
  for (int k = 1; k < x->nhosts; k++) {
    int g = (h + k) % x->nhosts, Lg = hier_size(x, g);
    int here = Lg > m ? (Lg - m + L - 1) / L : 0; /* local indices m, m + L, ... below Lg */
    if (t <= here) return hier_rank(x, g, m + (t - 1) * L);
    t -= here;
  }
  return -1;
}

/* The most items of any local rank of host h (the rounds of step B). */
static int rounds(const struct cpu_hier* x, int h) {
  int most = 0;
  for (int m = 0; m < hier_size(x, h); m++) {
    int t = 0;
    while (item_rank(x, h, m, t) >= 0) t++;
    if (t > most) most = t;
  }
  return most;
}

/* A header for the chunk [base, base + len) of rank q's block (its place in the output). */
static struct chunk_hdr block_hdr(const struct algo_args* a, int q, size_t base, size_t len) {
  return cpu_hdr(a, ((size_t)q * a->count + base) * a->es, len * a->es);
}

/* Receives chunk [base, base + len) of rank q's block from rank `from` into the output. */
static mscclppResult_t recv_block(struct cpu_net* net, const struct algo_args* a, int from, int q, size_t base,
                                  size_t len) {
  struct chunk_hdr want = block_hdr(a, q, base, len);
  const struct chunk_hdr* got;
  MPP_CHECK(cpu_recv(net, &net->pipes[from], &want, &got));
  memcpy((char*)a->recv + want.offset, chunk_data(got), want.bytes);
  return cpu_recv_done(net, &net->pipes[from]);
}

/* Step A. */
static mscclppResult_t cross_step(struct cpu_net* net, const struct cpu_hier* x, const struct algo_args* a, size_t base,
                                  size_t len) {
  int me = net->ac->rank, h = x->host_of[me], l = x->local_of[me], L = hier_size(x, h);
  struct chunk_hdr hd = block_hdr(a, me, base, len);
  for (int k = 1; k < x->nhosts; k++) {
    int g = (h + k) % x->nhosts;
    MPP_CHECK(cpu_send(net, &net->pipes[hier_rank(x, g, l % hier_size(x, g))], &hd, (const char*)a->send + base * a->es));
  }
  for (int k = 1; k < x->nhosts; k++) {
    int g = (h + k) % x->nhosts;
    for (int m = l; m < hier_size(x, g); m += L) {
      int q = hier_rank(x, g, m);
      MPP_CHECK(recv_block(net, a, q, q, base, len));
    }
  }
  return mscclppSuccess;
}

/* Step B, round t. */
static mscclppResult_t local_round(struct cpu_net* net, const struct cpu_hier* x, const struct algo_args* a, size_t base,
                                   size_t len, int t) {
  int me = net->ac->rank, h = x->host_of[me], l = x->local_of[me], L = hier_size(x, h);
  int mine = item_rank(x, h, l, t);
  if (mine >= 0) {
    struct chunk_hdr hd = block_hdr(a, mine, base, len);
    for (int k = 1; k < L; k++)
      MPP_CHECK(cpu_send(net, &net->pipes[hier_rank(x, h, (l + k) % L)], &hd, (const char*)a->recv + hd.offset));
  }
  for (int k = 1; k < L; k++) {
    int m = (l + k) % L, q = item_rank(x, h, m, t);
    if (q >= 0) MPP_CHECK(recv_block(net, a, hier_rank(x, h, m), q, base, len));
  }
  return mscclppSuccess;
}

mscclppResult_t cpu_allgather_hier(struct algo_comm* ac, const struct algo_args* a) {
  struct cpu_net* net;
  const struct cpu_hier* x;
  MPP_CHECK(cpu_hier_begin(ac, a, &net, &x));
  size_t block = a->count * a->es, step = net->chunk / a->es;
  char* own = (char*)a->recv + (size_t)ac->rank * block;
  if (own != (const char*)a->send) memcpy(own, a->send, block);
  int nrounds = rounds(x, x->host_of[ac->rank]);
  for (size_t base = 0; base < a->count; base += step) {
    size_t len = min_size(step, a->count - base);
    MPP_CHECK(cross_step(net, x, a, base, len));
    for (int t = 0; t < nrounds; t++) MPP_CHECK(local_round(net, x, a, base, len, t));
  }
  return mscclppSuccess;
}
