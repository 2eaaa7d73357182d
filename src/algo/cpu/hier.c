/* hier.c - the host layout of a communicator and the prologue shared by the hierarchical CPU
 * algorithms (see hier.h). */
#include "algo/cpu/hier.h"

#include <stdlib.h>

#include "core/comm.h"
#include "util/err.h"

/* Host index of every rank into host_of (hosts in the order of their lowest rank); returns the
 * number of hosts. first_rank: scratch of nranks entries (a representative rank per host). */
static int number_hosts(const struct mscclppComm* comm, int* host_of, int* first_rank) {
  int nh = 0;
  for (int r = 0; r < comm->nranks; r++) {
    int h = 0;
    while (h < nh && comm->peers[first_rank[h]].host_hash != comm->peers[r].host_hash) h++;
    if (h == nh) first_rank[nh++] = r;
    host_of[r] = h;
  }
  return nh;
}

int cpu_hier_count_hosts(const struct algo_comm* ac) {
  int n = ac->nranks;
  int* buf = malloc(2 * (size_t)n * sizeof(int));
  if (buf == NULL) return -1;
  int nh = number_hosts(ac->comm, buf, buf + n);
  free(buf);
  return nh;
}

void cpu_hier_free(struct cpu_hier* h) {
  if (h == NULL) return;
  free(h->host_of);
  free(h->local_of);
  free(h->first);
  free(h->members);
  free(h);
}

static mscclppResult_t hier_make(const struct mscclppComm* comm, struct cpu_hier* x) {
  int n = comm->nranks;
  int* rep = malloc((size_t)n * sizeof(int));
  x->host_of = malloc((size_t)n * sizeof(int));
  x->local_of = malloc((size_t)n * sizeof(int));
  x->first = calloc((size_t)n + 1, sizeof(int));
  x->members = malloc((size_t)n * sizeof(int));
  if (!rep || !x->host_of || !x->local_of || !x->first || !x->members) {
    free(rep);
    return MPP_ERR(mscclppSystemError, "collectives: out of host memory for the host layout of %d ranks", n);
  }
  x->nhosts = number_hosts(comm, x->host_of, rep);
  free(rep);
  for (int r = 0; r < n; r++) x->first[x->host_of[r] + 1]++; /* sizes, then prefix sums */
  for (int h = 0; h < x->nhosts; h++) x->first[h + 1] += x->first[h];
  x->kmin = n;
  for (int h = 0; h < x->nhosts; h++)
    if (hier_size(x, h) < x->kmin) x->kmin = hier_size(x, h);
  int* fill = calloc((size_t)x->nhosts, sizeof(int));
  if (fill == NULL) return MPP_ERR(mscclppSystemError, "collectives: out of host memory for the host layout");
  for (int r = 0; r < n; r++) {
    int h = x->host_of[r];
    x->local_of[r] = fill[h];
    x->members[x->first[h] + fill[h]++] = r;
  }
  free(fill);
  return mscclppSuccess;
}

mscclppResult_t cpu_hier_get(struct algo_comm* ac, const struct cpu_hier** out) {
  if (ac->hier == NULL) {
    struct cpu_hier* x = calloc(1, sizeof(*x));
    if (x == NULL) return MPP_ERR(mscclppSystemError, "collectives: out of host memory");
    mscclppResult_t res = hier_make(ac->comm, x);
    if (res != mscclppSuccess) {
      cpu_hier_free(x);
      return res;
    }
    ac->hier = x;
  }
  *out = ac->hier;
  return mscclppSuccess;
}

/* Whether ranks a and b of different hosts exchange data in a hierarchical algorithm (symmetric). */
static int cross_pair(const struct cpu_hier* x, int a, int b) {
  int la = x->local_of[a], lb = x->local_of[b];
  return la % hier_size(x, x->host_of[b]) == lb || lb % hier_size(x, x->host_of[a]) == la;
}

/* Whether a and b are both their hosts' broadcast leaders for root (symmetric). */
static int leader_pair(const struct cpu_hier* x, int root, int a, int b) {
  return cpu_hier_leader(x, x->host_of[a], root) == a && cpu_hier_leader(x, x->host_of[b], root) == b;
}

mscclppResult_t cpu_hier_begin(struct algo_comm* ac, const struct algo_args* a, struct cpu_net** out,
                               const struct cpu_hier** hier) {
  struct cpu_net* net;
  const struct cpu_hier* x;
  MPP_CHECK(cpu_hier_get(ac, &x));
  MPP_CHECK(cpu_net_get(ac, &net));
  MPP_CHECK(cpu_net_usable(net, algo_coll_name(a->coll)));
  net->coll = a->coll;
  /* Pairs connect in increasing peer order on every rank, over a symmetric set of pairs: no cycle of
   * ranks waiting for each other (as cpu_connect_all). */
  int me = ac->rank, bcast = a->coll == ALGO_COLL_BROADCAST;
  for (int r = 0; r < ac->nranks; r++)
    if (r != me && (x->host_of[r] == x->host_of[me] || cross_pair(x, me, r) || (bcast && leader_pair(x, a->root, me, r))))
      MPP_CHECK(cpu_connect(net, r));
  *out = net;
  *hier = x;
  return mscclppSuccess;
}

void cpu_hier_ops(enum elem_op op, enum elem_op* first, enum elem_op* second) {
  *first = op == ELEM_OP_AVG ? ELEM_OP_SUM : op;
  *second = op == ELEM_OP_PREMUL ? ELEM_OP_SUM : op;
}
