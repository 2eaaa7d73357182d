/* xhost_p2p.c - a group's sends and receives of GPU ranks on several hosts (xhost.h): each send's
 * data is staged in pinned host memory, one host step runs the CPU engine (algo/cpu/p2p.c) over
 * the communicator's host pipes for all of them, and each receive's data is copied out after it.
 * The stage holds every op of the group at once (it grows to fit). */
#include <stdlib.h>

#include "algo/algo.h"
#include "algo/cpu/net.h"
#include "algo/gpu/xhost.h"
#include "util/err.h"

#if MSCCLPP_HAVE_CUDA

mscclppResult_t xh_p2p_comm(struct p2p_op* ops, int nops, struct algo_comm* ac) {
  struct gpu_xhost* x;
  MPP_CHECK(xh_get(ac, &x));
  /* The pipes the group needs are made here, in increasing peer order (as the CPU engine would),
   * not in the host step: CUDA calls are forbidden there, and making a connection claims the
   * communicator, which this thread may hold in a later call meanwhile. */
  struct cpu_net* net;
  MPP_CHECK(cpu_net_get(ac, &net));
  for (int peer = 0; peer < ac->nranks; peer++) {
    int used = 0;
    for (int i = 0; i < nops && !used; i++) used = ops[i].ac == ac && ops[i].peer == peer && peer != ac->rank;
    if (used) MPP_CHECK(cpu_connect(net, peer));
  }
  size_t total = 0;
  int n = 0;
  void* stream = NULL;
  for (int i = 0; i < nops; i++)
    if (ops[i].ac == ac) {
      if (stream == NULL) stream = ops[i].stream;
      total += (ops[i].bytes + 63) & ~(size_t)63, n++;
    }
  if (n > x->p2p_cap) { /* grows to the largest group seen: later groups allocate nothing */
    struct p2p_op* more = realloc(x->p2p_tmp, (size_t)n * sizeof(*more));
    if (more == NULL) return MPP_ERR(mscclppSystemError, "send/recv across hosts: out of host memory for %d ops", n);
    x->p2p_tmp = more, x->p2p_cap = n;
  }
  struct p2p_op* host = x->p2p_tmp;
  char* stage = NULL;
  mscclppResult_t res = xh_stage(x, total, &stage);
  size_t off = 0;
  int k = 0;
  for (int i = 0; i < nops && res == mscclppSuccess; i++) {
    if (ops[i].ac != ac) continue;
    host[k] = ops[i];
    host[k].buf = stage + off, host[k].stream = NULL, host[k].done = 0, host[k].finished = 0;
    if (ops[i].is_send) res = xh_d2h(host[k].buf, ops[i].bytes, ops[i].buf, ops[i].bytes, ops[i].bytes, 1, stream);
    off += (ops[i].bytes + 63) & ~(size_t)63, k++;
  }
  if (res == mscclppSuccess) res = xh_host_p2p(x, stream, host, n);
  for (int i = 0, j = 0; i < nops && res == mscclppSuccess; i++) {
    if (ops[i].ac != ac) continue;
    if (!ops[i].is_send) res = xh_h2d(ops[i].buf, ops[i].bytes, host[j].buf, ops[i].bytes, ops[i].bytes, 1, stream);
    j++;
  }
  return res;
}

#else /* CPU-only build */

mscclppResult_t xh_p2p_comm(struct p2p_op* ops, int nops, struct algo_comm* ac) {
  (void)ops, (void)nops, (void)ac;
  return MPP_ERR(mscclppInvalidUsage, "GPU collectives: this library was built without CUDA");
}

#endif
