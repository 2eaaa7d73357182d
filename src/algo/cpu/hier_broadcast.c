/* hier_broadcast.c - broadcast across hosts (see hier.h). Each host has a leader: the rank whose
 * local index is the root's modulo the host's size (on the root's host, the root). Per chunk,
 * split in H slices (H: hosts):
 *   A. the root sends slice h to the leader of every other host h;
 *   B. the leaders allgather their slices (the root's own slice is slice g, its host's);
 *   C. every leader sends the whole chunk to the other ranks of its host.
 * Each host receives the message once from other hosts; the root's host sends (H-1)/H of it in A
 * and 1/H of it to each other host in B. */
#include <string.h>

#include "algo/cpu/hier.h"
#include "util/err.h"

struct bc {
  struct cpu_net* net;
  const struct cpu_hier* x;
  const struct algo_args* a;
  int me, h, g, H; /* g: the root's host */
  int leader;      /* this host's leader */
};

static const char* src_of(const struct bc* c, size_t elem) {
  const void* buf = c->me == c->a->root ? c->a->send : c->a->recv;
  return (const char*)buf + elem * c->a->es;
}

static mscclppResult_t send_slice(struct bc* c, int to, size_t base, size_t len, int slice) {
  size_t off, cnt;
  cpu_slice(len, c->H, slice, &off, &cnt);
  if (cnt == 0) return mscclppSuccess;
  struct chunk_hdr hd = cpu_hdr(c->a, (base + off) * c->a->es, cnt * c->a->es);
  return cpu_send(c->net, &c->net->pipes[to], &hd, src_of(c, base + off));
}

static mscclppResult_t recv_slice(struct bc* c, int from, size_t base, size_t len, int slice) {
  size_t off, cnt;
  cpu_slice(len, c->H, slice, &off, &cnt);
  return cnt == 0 ? mscclppSuccess : cpu_recv_copy(c->net, c->a, from, base + off, cnt);
}

/* Steps A and B at a leader. */
static mscclppResult_t leaders(struct bc* c, size_t base, size_t len) {
  for (int k = 1; k < c->H && c->me == c->a->root; k++) {
    int h = (c->g + k) % c->H;
    MPP_CHECK(send_slice(c, cpu_hier_leader(c->x, h, c->a->root), base, len, h));
  }
  if (c->me != c->a->root) MPP_CHECK(recv_slice(c, c->a->root, base, len, c->h));
  for (int k = 1; k < c->H; k++)
    MPP_CHECK(send_slice(c, cpu_hier_leader(c->x, (c->h + k) % c->H, c->a->root), base, len, c->h));
  for (int k = 1; k < c->H; k++) {
    int h = (c->h + k) % c->H;
    MPP_CHECK(recv_slice(c, cpu_hier_leader(c->x, h, c->a->root), base, len, h));
  }
  return mscclppSuccess;
}

mscclppResult_t cpu_broadcast_hier(struct algo_comm* ac, const struct algo_args* a) {
  struct bc c = {.a = a, .me = ac->rank};
  MPP_CHECK(cpu_hier_begin(ac, a, &c.net, &c.x));
  c.h = c.x->host_of[c.me];
  c.g = c.x->host_of[a->root];
  c.H = c.x->nhosts;
  c.leader = cpu_hier_leader(c.x, c.h, a->root);
  int L = hier_size(c.x, c.h), l = c.x->local_of[c.me];
  size_t step = c.net->chunk / a->es, bytes = a->count * a->es;
  if (c.me == a->root && a->send != a->recv) memcpy(a->recv, a->send, bytes);
  for (size_t base = 0; base < a->count; base += step) {
    size_t len = min_size(step, a->count - base);
    if (c.me == c.leader) {
      MPP_CHECK(leaders(&c, base, len));
      struct chunk_hdr hd = cpu_hdr(a, base * a->es, len * a->es);
      for (int k = 1; k < L; k++)
        MPP_CHECK(cpu_send(c.net, &c.net->pipes[hier_rank(c.x, c.h, (l + k) % L)], &hd, (char*)a->recv + base * a->es));
    } else {
      MPP_CHECK(cpu_recv_copy(c.net, a, c.leader, base, len));
    }
  }
  return mscclppSuccess;
}
