/* xhost_algos.c - the collectives of GPU ranks on several hosts (xhost.h): the host family (every
 * collective through the communicator's host pipes) and the hierarchical family (NVLink inside a
 * host, one rail of ranks per local index between hosts). */
#include <string.h>

#include "algo/algo.h"
#include "algo/cpu/hier.h"
#include "algo/cpu/net.h"
#include "algo/gpu/gpu.h"
#include "algo/gpu/xhost.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

#if MSCCLPP_HAVE_CUDA

/* ---- the host family ---------------------------------------------------------------------------- */

/* Blocks of count elements on each side of a collective's buffers: a piece of the host family moves
 * elements [o, o + c) of every block. */
static void host_blocks(const struct algo_args* a, int n, size_t* sblocks, size_t* rblocks) {
  *sblocks = *rblocks = 1;
  if (a->coll == ALGO_COLL_ALLGATHER || a->coll == ALGO_COLL_ALLTOALL) *rblocks = (size_t)n;
  if (a->coll == ALGO_COLL_REDUCESCATTER || a->coll == ALGO_COLL_ALLTOALL) *sblocks = (size_t)n;
}

/* The bytes the table counts for a call of c elements per block (see tuning/algo.tsv). */
static size_t table_bytes(const struct algo_args* a, size_t c, int n) {
  int whole = a->coll == ALGO_COLL_ALLGATHER || a->coll == ALGO_COLL_REDUCESCATTER || a->coll == ALGO_COLL_ALLTOALL;
  return c * a->es * (whole ? (size_t)n : 1);
}

/* Piece [o, o + c): stage the send blocks, run the CPU collective over the stage, copy the receive
 * blocks back. Ranks that send nothing (broadcast's non-roots) or keep nothing (reduce's) skip
 * their copies. */
static mscclppResult_t host_piece(struct gpu_xhost* x, const struct algo_args* a, const struct algo_desc* d, char* stage,
                                  size_t sb, size_t rb, size_t o, size_t c) {
  struct algo_comm* ac = x->ac;
  size_t es = a->es, w = c * es, pitch = a->count * es;
  char* hsend = stage;
  char* hrecv = stage + sb * w;
  int sends = a->coll != ALGO_COLL_BROADCAST || ac->rank == a->root;
  int keeps = a->coll != ALGO_COLL_REDUCE || ac->rank == a->root;
  if (sends) MPP_CHECK(xh_d2h(hsend, w, (const char*)a->send + o * es, pitch, w, sb, a->stream));
  struct algo_args h = *a;
  h.send = hsend, h.recv = hrecv, h.count = c, h.bytes = table_bytes(a, c, ac->nranks);
  MPP_CHECK(xh_host_coll(x, a->stream, ac, d, &h, 0));
  if (keeps) MPP_CHECK(xh_h2d((char*)a->recv + o * es, pitch, hrecv, w, w, rb, a->stream));
  return mscclppSuccess;
}

mscclppResult_t gpu_coll_host(struct algo_comm* ac, const struct algo_args* a) {
  struct gpu_xhost* x;
  MPP_CHECK(xh_get(ac, &x));
  if (a->count == 0) return mscclppSuccess;
  size_t sb, rb;
  host_blocks(a, ac->nranks, &sb, &rb);
  size_t c = xh_piece(a->es) / (sb + rb);
  if (c == 0) c = 1;
  if (c > a->count) c = a->count;
  const struct algo_desc* d = NULL;
  MPP_CHECK(algo_select(a->coll, mscclppRankCpu, ac->nranks, ac->nhosts, table_bytes(a, c, ac->nranks), a->dtype, 0, &d));
  if (d == NULL) return MPP_ERR(mscclppInternalError, "GPU collectives across hosts: no CPU algorithm for %s", algo_coll_name(a->coll));
  /* The pipes are made here, not in the host steps: CUDA calls are forbidden there, and making a
   * connection claims the communicator, which this thread may hold in a later call meanwhile. */
  struct cpu_net* net;
  MPP_CHECK(cpu_net_get(ac, &net));
  MPP_CHECK(cpu_connect_all(net));
  char* stage;
  MPP_CHECK(xh_stage(x, (sb + rb) * c * a->es, &stage));
  for (size_t o = 0; o < a->count; o += c) {
    size_t n = a->count - o < c ? a->count - o : c;
    MPP_CHECK(host_piece(x, a, d, stage, sb, rb, o, n));
  }
  return mscclppSuccess;
}

/* ---- the hierarchical family -------------------------------------------------------------------- */

struct hier_ctx {
  struct gpu_xhost* x;
  struct gpu_net* g;     /* the host communicator's GPU state */
  struct algo_comm* rac; /* the rail's CPU state */
  const struct algo_args* a;
  enum elem_op first, second; /* the operators inside a host and across hosts */
  int divide;                 /* avg: the rail's results are divided by the ranks of the job */
};

/* One launch of the host's GPU communicator: LL when its parts fit the inbox, else bulk. */
static mscclppResult_t local_launch(const struct hier_ctx* c, const struct gx_plan* p) {
  if (p->maxlen <= gpu_ll_max(&c->g->d)) return gpu_launch_ll(&c->g->d, p, c->a->stream);
  return gpu_launch_bulk(&c->g->d, p, c->a->stream);
}

/* A plan of the host communicator for collective a, the operator inside a host. */
static void local_plan(const struct hier_ctx* c, struct gx_plan* p, int mode, const void* src, void* dst) {
  const struct algo_args* a = c->a;
  memset(p, 0, sizeof(*p));
  p->src = (const char*)src, p->dst = (char*)dst, p->mode = mode;
  p->dtype = a->dtype, p->op = c->first, p->scalar = a->scalar, p->scalar_dev = a->scalar_dev;
  p->scale_send = mode == GX_REDUCE && c->first == ELEM_OP_PREMUL;
}

/* The rail collective `coll` of count elements per block over host buffers, as a host step. */
static mscclppResult_t rail_step(const struct hier_ctx* c, enum algo_coll coll, void* send, void* recv, size_t count,
                                 int root) {
  const struct algo_args* a = c->a;
  struct algo_args h = *a;
  int n = c->rac->nranks;
  h.coll = coll, h.send = send, h.recv = recv, h.count = count, h.root = root;
  h.op = c->second, h.user_op = mscclppSum;
  h.bytes = table_bytes(&h, count, n);
  const struct algo_desc* d = NULL;
  MPP_CHECK(algo_select(coll, mscclppRankCpu, n, c->rac->nhosts, h.bytes, a->dtype, 0, &d));
  if (d == NULL) return MPP_ERR(mscclppInternalError, "GPU collectives across hosts: no CPU algorithm for the rail");
  int reduces = coll == ALGO_COLL_ALLREDUCE || coll == ALGO_COLL_REDUCESCATTER;
  return xh_host_coll(c->x, a->stream, c->rac, d, &h, reduces ? c->divide : 0);
}

/* Whether the hosts' partial results of coll are reduced on the GPU rather than by the CPU
 * collective in the host step (MSCCLPP_ALGO_GPU_HOST_REDUCE; auto: reducescatter always, allreduce
 * on 2 hosts, where its allgather moves no more than reduce-scatter + allgather), with few enough
 * hosts for one kernel's sources. */
static int reduce_on_gpu(const struct gpu_xhost* x, enum algo_coll coll) {
  const char* mode = param_str(PARAM_ALGO_GPU_HOST_REDUCE);
  if (x->nhosts > XH_MAX_SRCS || strcmp(mode, "host") == 0) return 0;
  return strcmp(mode, "gpu") == 0 || coll == ALGO_COLL_REDUCESCATTER || x->nhosts == 2;
}

/* dev (k elements) = the hosts' blocks reduced in host order, from blocks[h] of the host-mapped
 * stage (w bytes apart), this host's from dev itself when own_in_dev, divided for avg. */
static mscclppResult_t gpu_reduce_hosts(const struct hier_ctx* c, char* dev, const char* blocks, size_t w, size_t k,
                                        int own_in_dev) {
  const void* srcs[XH_MAX_SRCS];
  for (int h = 0; h < c->x->nhosts; h++)
    srcs[h] = h == c->x->host && own_in_dev ? (const void*)dev : (const void*)xh_stage_dev(c->x, blocks + (size_t)h * w);
  return xh_reduce_launch(dev, srcs, c->x->nhosts, k, c->a->dtype, c->second, c->divide, c->a->stream);
}

/* Element slice of count for local rank l of L (as the two-phase plans cut it). */
static void lslice(size_t count, int L, int l, size_t* off, size_t* n) {
  size_t per = (count + (size_t)L - 1) / (size_t)L;
  *off = per * (size_t)l < count ? per * (size_t)l : count;
  *n = count - *off < per ? count - *off : per;
}

/* The elements per piece when `bufs` pieces of es-byte elements share a host step's stage (at
 * most count), and the stage, large enough for them. */
static mscclppResult_t rail_pieces(struct gpu_xhost* x, size_t count, size_t es, size_t bufs, size_t* piece, char** stage) {
  size_t k = xh_piece(es) / bufs;
  if (k == 0) k = 1;
  *piece = k;
  return xh_stage(x, bufs * (count < k ? count : k) * es, stage);
}

/* Allreduce: reduce-scatter inside the host, allreduce of each rank's slice along its rail (in
 * pieces through the stage), allgather inside the host. */
static mscclppResult_t hier_allreduce(const struct hier_ctx* c) {
  const struct algo_args* a = c->a;
  struct gpu_xhost* x = c->x;
  int L = x->lsize;
  struct algo_args la = *a;
  la.op = c->first;
  struct gx_plan p[2];
  gpu_plans(&la, x->lrank, L, 1, p);
  MPP_CHECK(local_launch(c, &p[0]));
  size_t off, n, es = a->es;
  lslice(a->count, L, x->lrank, &off, &n);
  size_t piece;
  char* stage;
  int on_gpu = reduce_on_gpu(x, ALGO_COLL_ALLREDUCE);
  MPP_CHECK(rail_pieces(x, n, es, on_gpu ? (size_t)x->nhosts : 1, &piece, &stage));
  for (size_t o = 0; o < n; o += piece) {
    size_t k = n - o < piece ? n - o : piece, w = k * es;
    char* dev = (char*)a->recv + (off + o) * es;
    if (on_gpu) { /* the hosts' partials gathered along the rail (in place: this host's block at its index), reduced here */
      char* mine = stage + (size_t)x->host * w;
      MPP_CHECK(xh_d2h(mine, w, dev, w, w, 1, a->stream));
      MPP_CHECK(rail_step(c, ALGO_COLL_ALLGATHER, mine, stage, k, -1));
      MPP_CHECK(gpu_reduce_hosts(c, dev, stage, w, k, 1));
      continue;
    }
    MPP_CHECK(xh_d2h(stage, w, dev, w, w, 1, a->stream));
    MPP_CHECK(rail_step(c, ALGO_COLL_ALLREDUCE, stage, stage, k, -1));
    MPP_CHECK(xh_h2d(dev, w, stage, w, w, 1, a->stream));
  }
  return local_launch(c, &p[1]);
}

/* Allgather: the own block along the rail (in pieces), each host's blocks then inside the host. */
static mscclppResult_t hier_allgather(const struct hier_ctx* c) {
  const struct algo_args* a = c->a;
  struct gpu_xhost* x = c->x;
  int H = x->nhosts, L = x->lsize;
  size_t es = a->es, block = a->count * es, piece;
  char* stage;
  MPP_CHECK(rail_pieces(x, a->count, es, (size_t)(1 + H), &piece, &stage));
  for (size_t o = 0; o < a->count; o += piece) {
    size_t k = a->count - o < piece ? a->count - o : piece, w = k * es;
    MPP_CHECK(xh_d2h(stage, w, (const char*)a->send + o * es, w, w, 1, a->stream));
    MPP_CHECK(rail_step(c, ALGO_COLL_ALLGATHER, stage, stage + w, k, -1));
    for (int h = 0; h < H; h++) {
      char* dev = (char*)a->recv + (size_t)hier_rank(x->lay, h, x->lrank) * block + o * es;
      MPP_CHECK(xh_h2d(dev, w, stage + w * (size_t)(1 + h), w, w, 1, a->stream));
    }
  }
  for (int h = 0; h < H; h++) {
    struct gx_plan p;
    local_plan(c, &p, GX_COPY, (char*)a->recv + (size_t)hier_rank(x->lay, h, x->lrank) * block, a->recv);
    for (int q = 0; q < L; q++)
      p.send_len[q] = p.recv_len[q] = block, p.recv_off[q] = (uint64_t)hier_rank(x->lay, h, q) * block;
    p.maxlen = block;
    MPP_CHECK(local_launch(c, &p));
  }
  return mscclppSuccess;
}

/* This host's partial of host h's block [o, o + k) of the output (NVLink: the host's ranks with this
 * local index reduce it), into dev. */
static mscclppResult_t rs_local(const struct hier_ctx* c, int h, char* dev, size_t o, size_t k) {
  const struct algo_args* a = c->a;
  struct gpu_xhost* x = c->x;
  size_t w = k * a->es;
  struct gx_plan p;
  local_plan(c, &p, GX_REDUCE, a->send, dev);
  for (int q = 0; q < x->lsize; q++)
    p.send_off[q] = ((uint64_t)hier_rank(x->lay, h, q) * a->count + o) * a->es, p.send_len[q] = p.recv_len[q] = w;
  p.maxlen = w;
  return local_launch(c, &p);
}

/* A reducescatter piece with the hosts' partials reduced on the GPU: this host's partial of every
 * host's block, this host's first (in place, dev is part of the input the later ones read), staged
 * (the stage's first H blocks) and swapped along the rail (an alltoall into the next H blocks,
 * which keeps this host's own), then reduced from there in host order into dev. */
static mscclppResult_t rs_piece_gpu(const struct hier_ctx* c, char* stage, char* dev, size_t o, size_t k) {
  struct gpu_xhost* x = c->x;
  int H = x->nhosts;
  size_t w = k * c->a->es;
  for (int i = 0; i < H; i++) {
    int h = (x->host + i) % H;
    MPP_CHECK(rs_local(c, h, dev, o, k));
    MPP_CHECK(xh_d2h(stage + (size_t)h * w, w, dev, w, w, 1, c->a->stream));
  }
  char* got = stage + (size_t)H * w;
  MPP_CHECK(rail_step(c, ALGO_COLL_ALLTOALL, stage, got, k, -1));
  return gpu_reduce_hosts(c, dev, got, w, k, 0);
}

/* Reducescatter: per piece, each host's blocks reduced inside this host (this host's first: in
 * place, its block is the output), staged, then reduce-scattered along the rail. */
static mscclppResult_t hier_reducescatter(const struct hier_ctx* c) {
  const struct algo_args* a = c->a;
  struct gpu_xhost* x = c->x;
  int H = x->nhosts;
  size_t es = a->es, piece;
  char* stage;
  int on_gpu = reduce_on_gpu(x, ALGO_COLL_REDUCESCATTER);
  MPP_CHECK(rail_pieces(x, a->count, es, on_gpu ? (size_t)(2 * H) : (size_t)(1 + H), &piece, &stage));
  for (size_t o = 0; o < a->count; o += piece) {
    size_t k = a->count - o < piece ? a->count - o : piece, w = k * es;
    char* dev = (char*)a->recv + o * es;
    if (on_gpu) {
      MPP_CHECK(rs_piece_gpu(c, stage, dev, o, k));
      continue;
    }
    for (int i = 0; i < H; i++) {
      int h = (x->host + i) % H;
      MPP_CHECK(rs_local(c, h, dev, o, k));
      MPP_CHECK(xh_d2h(stage + (size_t)h * w, w, dev, w, w, 1, a->stream));
    }
    char* out = stage + (size_t)H * w;
    MPP_CHECK(rail_step(c, ALGO_COLL_REDUCESCATTER, stage, out, k, -1));
    MPP_CHECK(xh_h2d(dev, w, out, w, w, 1, a->stream));
  }
  return mscclppSuccess;
}

/* Broadcast: the root's host first has the message on every rank (NVLink), then each local rank
 * carries its slice to the other hosts along its rail (so every rail works, as allreduce's), and
 * the other hosts gather the slices inside (NVLink). */
static mscclppResult_t hier_broadcast(const struct hier_ctx* c) {
  const struct algo_args* a = c->a;
  struct gpu_xhost* x = c->x;
  int root = a->root, hroot = x->lay->host_of[root], lroot = x->lay->local_of[root], me = x->ac->rank, L = x->lsize;
  size_t es = a->es, block = a->count * es;
  struct algo_args la = *a; /* p[1] of a two-phase allreduce of recv: the allgather of the slices, in place */
  la.coll = ALGO_COLL_ALLREDUCE, la.send = la.recv, la.op = ELEM_OP_SUM;
  struct gx_plan p[2];
  gpu_plans(&la, x->lrank, L, 1, p);
  if (x->host == hroot) {
    struct gx_plan b;
    local_plan(c, &b, GX_COPY, me == root ? a->send : a->recv, a->recv);
    for (int q = 0; q < L && x->lrank == lroot; q++) b.send_len[q] = block;
    b.recv_len[lroot] = block;
    b.maxlen = block;
    MPP_CHECK(local_launch(c, &b));
  }
  size_t off, n, piece;
  lslice(a->count, L, x->lrank, &off, &n);
  char* stage;
  MPP_CHECK(rail_pieces(x, n, es, 1, &piece, &stage));
  for (size_t o = 0; o < n; o += piece) {
    size_t w = (n - o < piece ? n - o : piece) * es;
    char* dev = (char*)a->recv + (off + o) * es;
    if (x->host == hroot) MPP_CHECK(xh_d2h(stage, w, dev, w, w, 1, a->stream));
    MPP_CHECK(rail_step(c, ALGO_COLL_BROADCAST, stage, stage, w / es, hroot));
    if (x->host != hroot) MPP_CHECK(xh_h2d(dev, w, stage, w, w, 1, a->stream));
  }
  return x->host == hroot ? mscclppSuccess : local_launch(c, &p[1]);
}

mscclppResult_t gpu_coll_hier(struct algo_comm* ac, const struct algo_args* a) {
  struct gpu_xhost* x;
  MPP_CHECK(xh_get(ac, &x));
  int has = a->coll == ALGO_COLL_ALLREDUCE || a->coll == ALGO_COLL_ALLGATHER || a->coll == ALGO_COLL_REDUCESCATTER ||
            a->coll == ALGO_COLL_BROADCAST;
  /* One rank per host: the rails are the communicator, whose host pipes the host family uses. */
  if (!has || !x->uniform || x->lsize < 2 || x->lsize > GPU_MAX_RANKS) {
    LOG_DEBUG_(LOG_SUB_ALGO, "%s across hosts: %s host layout, host family", algo_coll_name(a->coll),
               x->uniform ? "this" : "an uneven");
    return gpu_coll_host(ac, a);
  }
  if (a->count == 0) return mscclppSuccess;
  MPP_CHECK(xh_children(x));
  MPP_CHECK(xh_children_health(x));
  struct hier_ctx c = {.x = x, .a = a};
  struct algo_comm* lac;
  MPP_CHECK(algo_comm_get(x->local, &lac));
  MPP_CHECK(gpu_net_get(lac, a->stream, &c.g));
  MPP_CHECK(algo_comm_get(x->rail, &c.rac));
  struct cpu_net* net; /* made here, as in gpu_coll_host */
  MPP_CHECK(cpu_net_get(c.rac, &net));
  MPP_CHECK(cpu_connect_all(net));
  cpu_hier_ops(a->op, &c.first, &c.second);
  if (a->op == ELEM_OP_AVG) c.second = ELEM_OP_SUM, c.divide = ac->nranks;
  switch (a->coll) {
    case ALGO_COLL_ALLREDUCE: return hier_allreduce(&c);
    case ALGO_COLL_ALLGATHER: return hier_allgather(&c);
    case ALGO_COLL_REDUCESCATTER: return hier_reducescatter(&c);
    default: return hier_broadcast(&c);
  }
}

#else /* CPU-only build */

mscclppResult_t gpu_coll_host(struct algo_comm* ac, const struct algo_args* a) {
  (void)ac, (void)a;
  return MPP_ERR(mscclppInvalidUsage, "GPU collectives: this library was built without CUDA");
}

mscclppResult_t gpu_coll_hier(struct algo_comm* ac, const struct algo_args* a) {
  (void)ac, (void)a;
  return MPP_ERR(mscclppInvalidUsage, "GPU collectives: this library was built without CUDA");
}

#endif
