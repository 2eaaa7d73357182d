/* hier_alltoall.c - alltoall across hosts (see hier.h). Destination rank r = (g, m) has on every
 * host h one carrier, the rank of local index m mod size(h) (on g: r itself); D(c) is the set of
 * destinations carried by local rank c of host h (every host g in host order, local indices c,
 * c + size(h), ... below size(g); c itself first among its own host's). Per chunk of the blocks,
 * two steps:
 *   1. inside the host: every rank sends each other local rank c one message holding its chunks of
 *      the blocks for D(c), in D(c)'s order; a carrier then builds, straight in its send slot to
 *      each remote r of D(c), the bundle of the host's chunks for r (local order), sends it, copies
 *      the host's chunks for itself into its output and only then acknowledges its inputs;
 *   2. across hosts: every rank receives from each other host g the bundle of its carrier there,
 *      rank (g, l mod size(g)), and copies its size(g) chunks into the senders' output blocks.
 * Bytes across hosts do not drop (every block must cross once, as in cpu_alltoall_direct: with H
 * hosts of L ranks each rank sends (n-L)/n S of an S-byte buffer across either way) but they go in
 * fewer, larger messages: per pipeline step a rank sends H-1 bundles of L chunks across instead of
 * n-L single chunks (L times fewer; hosts of L ranks each). A step moves chunk / (B es) elements of each block, B the
 * largest message in blocks (max over hosts of size(h) and, where size(h) > 1, |D(c)| <= sum over
 * g of ceil(size(g) / size(h))), so every message fits a slot; a call of count * B * es <= chunk
 * bytes is one step. Hosts of one rank each (B = 1) make it cpu_alltoall_direct's exchange.
 * Uneven hosts: a carrier of a small host carries several ranks of a larger one, and ranks of a
 * larger host beyond the smaller's size carry nothing to it.
 *
 * In place needs no care: the output chunk of rank q's block is written only after the input chunk
 * at the same place was read (q of this host: by the step-1 sends; remote q: in step 2, after every
 * bundle went out).
 * When a slot cannot hold one element of B blocks (a tiny MSCCLPP_ALGO_CPU_SCRATCH for the layout),
 * every rank runs cpu_alltoall_direct instead (the same decision on every rank). */
#include <string.h>

#include "algo/cpu/hier.h"
#include "util/err.h"
#include "util/log.h"

struct a2a {
  struct cpu_net* net;
  const struct cpu_hier* x;
  const struct algo_args* a;
  int me, h, l, L;
  size_t base, len; /* the step's chunk: elements [base, base + len) of every block */
};

/* The k-th destination of D(c) on host h, or -1 past its end. */
static int carried(const struct cpu_hier* x, int h, int c, int k) {
  int L = hier_size(x, h);
  for (int g = 0; g < x->nhosts; g++) {
    int Lg = hier_size(x, g), here = Lg > c ? (Lg - c + L - 1) / L : 0; /* c, c + L, ... below Lg */
    if (k < here) return hier_rank(x, g, c + k * L);
    k -= here;
  }
  return -1;
}

/* |D(c)| on host h. */
static int ncarried(const struct cpu_hier* x, int h, int c) {
  int k = 0;
  while (carried(x, h, c, k) >= 0) k++;
  return k;
}

/* B: the most blocks of any message of the layout (the same on every rank); a host of one rank
 * sends no step-1 message. */
static int most_blocks(const struct cpu_hier* x) {
  int b = 1;
  for (int h = 0; h < x->nhosts; h++) {
    int d = hier_size(x, h) > 1 ? ncarried(x, h, 0) : 1; /* local index 0 carries the most */
    if (d > b) b = d;
    if (hier_size(x, h) > b) b = hier_size(x, h);
  }
  return b;
}

/* The chunk of block r of this rank's input. */
static const char* in_chunk(const struct a2a* c, int r) {
  return (const char*)c->a->send + ((size_t)r * c->a->count + c->base) * c->a->es;
}

/* The output chunk of rank q's block. */
static char* out_chunk(const struct a2a* c, int q) {
  return (char*)c->a->recv + ((size_t)q * c->a->count + c->base) * c->a->es;
}

static struct chunk_hdr step_hdr(const struct a2a* c, int blocks) {
  return cpu_hdr(c->a, c->base * c->a->es, (size_t)blocks * c->len * c->a->es);
}

/* Step 1, sends: to each other local rank p its message (this rank's chunks for D(p)). */
static mscclppResult_t send_local(struct a2a* c) {
  size_t cb = c->len * c->a->es;
  for (int k = 1; k < c->L; k++) {
    int p = (c->l + k) % c->L, nd = ncarried(c->x, c->h, p);
    struct chunk_hdr hd = step_hdr(c, nd);
    struct cpu_pipe* pipe = &c->net->pipes[hier_rank(c->x, c->h, p)];
    void* slot;
    MPP_CHECK(cpu_send_begin(c->net, pipe, &slot));
    for (int i = 0; i < nd; i++) memcpy((char*)slot + (size_t)i * cb, in_chunk(c, carried(c->x, c->h, p, i)), cb);
    MPP_CHECK(cpu_send_commit(c->net, pipe, &hd));
  }
  return mscclppSuccess;
}

/* The chunk local rank p holds for the i-th destination of D(l): p's message (net->srcs[p]) or,
 * for p == l, this rank's input. */
static const char* local_piece(const struct a2a* c, int p, int i) {
  if (p == c->l) return in_chunk(c, carried(c->x, c->h, c->l, i));
  return (const char*)c->net->srcs[p] + (size_t)i * c->len * c->a->es;
}

/* Step 1 at the carrier: receives the local messages (left unacknowledged), sends the bundle of
 * each remote destination of D(l), copies the host's chunks for itself, then acknowledges. */
static mscclppResult_t carry(struct a2a* c) {
  struct cpu_net* net = c->net;
  int nd = ncarried(c->x, c->h, c->l);
  size_t cb = c->len * c->a->es;
  struct chunk_hdr want = step_hdr(c, nd), bundle = step_hdr(c, c->L);
  for (int p = 0; p < c->L; p++) {
    const struct chunk_hdr* got;
    if (p == c->l) continue;
    MPP_CHECK(cpu_recv(net, &net->pipes[hier_rank(c->x, c->h, p)], &want, &got));
    net->srcs[p] = chunk_data(got);
  }
  for (int i = 0; i < nd; i++) {
    int r = carried(c->x, c->h, c->l, i);
    if (r == c->me) {
      for (int p = 0; p < c->L; p++)
        if (p != c->l) memcpy(out_chunk(c, hier_rank(c->x, c->h, p)), local_piece(c, p, i), cb);
      continue;
    }
    void* slot;
    MPP_CHECK(cpu_send_begin(net, &net->pipes[r], &slot));
    for (int p = 0; p < c->L; p++) memcpy((char*)slot + (size_t)p * cb, local_piece(c, p, i), cb);
    MPP_CHECK(cpu_send_commit(net, &net->pipes[r], &bundle));
  }
  for (int p = 0; p < c->L; p++)
    if (p != c->l) MPP_CHECK(cpu_recv_done(net, &net->pipes[hier_rank(c->x, c->h, p)]));
  return mscclppSuccess;
}

/* Step 2: the bundle of each other host's carrier for this rank, into the senders' blocks. */
static mscclppResult_t recv_bundles(struct a2a* c) {
  struct cpu_net* net = c->net;
  size_t cb = c->len * c->a->es;
  for (int k = 1; k < c->x->nhosts; k++) {
    int g = (c->h + k) % c->x->nhosts, Lg = hier_size(c->x, g);
    struct cpu_pipe* pipe = &net->pipes[hier_rank(c->x, g, c->l % Lg)];
    struct chunk_hdr want = step_hdr(c, Lg);
    const struct chunk_hdr* got;
    MPP_CHECK(cpu_recv(net, pipe, &want, &got));
    const char* in = chunk_data(got);
    for (int p = 0; p < Lg; p++) memcpy(out_chunk(c, hier_rank(c->x, g, p)), in + (size_t)p * cb, cb);
    MPP_CHECK(cpu_recv_done(net, pipe));
  }
  return mscclppSuccess;
}

mscclppResult_t cpu_alltoall_hier(struct algo_comm* ac, const struct algo_args* a) {
  struct a2a c = {.a = a, .me = ac->rank};
  MPP_CHECK(cpu_hier_begin(ac, a, &c.net, &c.x));
  int b = most_blocks(c.x);
  size_t step = c.net->chunk / a->es / (size_t)b;
  if (step == 0) {
    LOG_INFO_(LOG_SUB_ALGO, "alltoall: %zu-byte chunks cannot hold %d blocks of %zu-byte elements: cpu_alltoall_direct",
              c.net->chunk, b, a->es);
    return cpu_alltoall_direct(ac, a);
  }
  c.h = c.x->host_of[c.me];
  c.l = c.x->local_of[c.me];
  c.L = hier_size(c.x, c.h);
  for (c.base = 0; c.base < a->count; c.base += step) {
    c.len = min_size(step, a->count - c.base);
    if (a->send != a->recv) memcpy(out_chunk(&c, c.me), in_chunk(&c, c.me), c.len * a->es);
    MPP_CHECK(send_local(&c));
    MPP_CHECK(carry(&c));
    MPP_CHECK(recv_bundles(&c));
  }
  return mscclppSuccess;
}
