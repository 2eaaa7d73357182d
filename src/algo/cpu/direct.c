/* direct.c - the all-to-all shaped collectives on CPU ranks: in every step each rank sends one chunk
 * to each other rank and receives one from each. Every byte crosses once, straight from its owner
 * to its destination.
 *
 * allgather:     chunk k of the input goes to every rank, which puts it in the sender's block.
 * reducescatter: chunk k of block q goes to rank q, which reduces the n chunks (in rank order).
 * alltoall:      chunk k of block q goes to rank q, which puts it in the sender's block.
 * In-place calls need no care: a step sends from its input range before anything lands in the
 * output range that overlaps it. */
#include <string.h>

#include "algo/cpu/net.h"
#include "elem/reduce.h"
#include "util/err.h"

/* Receives a chunk of want's shape from every other rank q into out + q * block (bytes). */
static mscclppResult_t recv_into_blocks(struct cpu_net* net, const struct chunk_hdr* want, char* out, size_t block) {
  int n = net->ac->nranks, me = net->ac->rank;
  for (int k = 1; k < n; k++) {
    int q = (me + k) % n;
    const struct chunk_hdr* h;
    MPP_CHECK(cpu_recv(net, &net->pipes[q], want, &h));
    memcpy(out + (size_t)q * block, chunk_data(h), want->bytes);
    MPP_CHECK(cpu_recv_done(net, &net->pipes[q]));
  }
  return mscclppSuccess;
}

/* Sends chunk h (at byte `at` of each block) of block q of the input to every other rank q. */
static mscclppResult_t send_blocks(struct cpu_net* net, const struct algo_args* a, const struct chunk_hdr* h, size_t at,
                                   size_t block) {
  int n = net->ac->nranks, me = net->ac->rank;
  for (int k = 1; k < n; k++) {
    int q = (me + k) % n;
    MPP_CHECK(cpu_send(net, &net->pipes[q], h, (const char*)a->send + (size_t)q * block + at));
  }
  return mscclppSuccess;
}

mscclppResult_t cpu_allgather_direct(struct algo_comm* ac, const struct algo_args* a) {
  struct cpu_net* net;
  MPP_CHECK(cpu_begin(ac, a, &net));
  int n = ac->nranks, me = ac->rank;
  size_t block = a->count * a->es, step = net->chunk / a->es;
  char* own = (char*)a->recv + (size_t)me * block;
  if (own != (const char*)a->send) memcpy(own, a->send, block);
  for (size_t base = 0; base < a->count; base += step) {
    size_t len = min_size(step, a->count - base);
    struct chunk_hdr h = cpu_hdr(a, base * a->es, len * a->es);
    for (int k = 1; k < n; k++)
      MPP_CHECK(cpu_send(net, &net->pipes[(me + k) % n], &h, (const char*)a->send + base * a->es));
    MPP_CHECK(recv_into_blocks(net, &h, (char*)a->recv + base * a->es, block));
  }
  return mscclppSuccess;
}

mscclppResult_t cpu_alltoall_direct(struct algo_comm* ac, const struct algo_args* a) {
  struct cpu_net* net;
  MPP_CHECK(cpu_begin(ac, a, &net));
  int me = ac->rank;
  size_t block = a->count * a->es, step = net->chunk / a->es;
  for (size_t base = 0; base < a->count; base += step) {
    size_t len = min_size(step, a->count - base), at = base * a->es;
    struct chunk_hdr h = cpu_hdr(a, at, len * a->es);
    MPP_CHECK(send_blocks(net, a, &h, at, block));
    if (a->send != a->recv) memcpy((char*)a->recv + (size_t)me * block + at, (const char*)a->send + (size_t)me * block + at, len * a->es);
    MPP_CHECK(recv_into_blocks(net, &h, (char*)a->recv + at, block));
  }
  return mscclppSuccess;
}

mscclppResult_t cpu_reducescatter_direct(struct algo_comm* ac, const struct algo_args* a) {
  struct cpu_net* net;
  MPP_CHECK(cpu_begin(ac, a, &net));
  int n = ac->nranks, me = ac->rank;
  size_t block = a->count * a->es, step = net->chunk / a->es;
  for (size_t base = 0; base < a->count; base += step) {
    size_t len = min_size(step, a->count - base), at = base * a->es;
    struct chunk_hdr h = cpu_hdr(a, at, len * a->es);
    MPP_CHECK(send_blocks(net, a, &h, at, block));
    net->srcs[me] = (const char*)a->send + (size_t)me * block + at;
    net->scalars[me] = a->scalar;
    for (int k = 1; k < n; k++) {
      int q = (me + k) % n;
      const struct chunk_hdr* got;
      MPP_CHECK(cpu_recv(net, &net->pipes[q], &h, &got));
      net->srcs[q] = chunk_data(got);
      net->scalars[q] = got->scalar;
    }
    elem_reduce((char*)a->recv + at, net->srcs, n, len, a->dtype, a->op, n, net->scalars);
    MPP_CHECK(cpu_done_all(net));
  }
  return mscclppSuccess;
}
