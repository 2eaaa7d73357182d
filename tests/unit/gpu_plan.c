/* The GPU collectives' exchange plans (src/algo/gpu/algos.c), checked without a GPU: the plans of
 * every rank are built for every collective, datatype, operator, placement, count and rank count;
 * both sides of every pair must agree on each part's length and all ranks on maxlen; then a CPU
 * simulation of what the kernels do with the plans (every part read first, scaled at the sender for
 * premulsum; then copied or reduced in rank order) must produce verify.h's expected outputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/gpu/gpu.h"
#include "elem/reduce.h"
#include "algo/verify.h"
#include "helpers.h"

#define MAXN 8

struct sim {
  int n, coll, dtype, op, inplace, root;
  size_t count, es, in_elems, out_elems;
  char* in[MAXN];
  char* out[MAXN];
  char* bufs[MAXN]; /* in-place: one buffer */
  struct algo_args a[MAXN];
  struct gx_plan p[MAXN][2];
  struct verify_spec spec;
};

static void setup(struct sim* s) {
  s->es = elem_dtype_size(s->dtype);
  size_t c = s->count;
  s->in_elems = s->out_elems = c;
  if (s->coll == ALGO_COLL_ALLGATHER || s->coll == ALGO_COLL_ALLTOALL) s->out_elems = c * (size_t)s->n;
  if (s->coll == ALGO_COLL_REDUCESCATTER || s->coll == ALGO_COLL_ALLTOALL) s->in_elems = c * (size_t)s->n;
  size_t cap = (s->in_elems > s->out_elems ? s->in_elems : s->out_elems) * s->es;
  for (int r = 0; r < s->n; r++) {
    s->bufs[r] = malloc(2 * cap);
    CHECK(s->bufs[r] != NULL);
    memset(s->bufs[r], 0xa5, 2 * cap);
    s->in[r] = s->bufs[r], s->out[r] = s->bufs[r] + cap;
    if (s->inplace) {
      s->out[r] = s->bufs[r];
      if (s->coll == ALGO_COLL_ALLGATHER) s->in[r] = s->out[r] + (size_t)r * c * s->es;
      if (s->coll == ALGO_COLL_REDUCESCATTER) s->out[r] = s->in[r] + (size_t)r * c * s->es;
    }
    if (s->coll != ALGO_COLL_BROADCAST || r == s->root) verify_fill(&s->spec, r, 0, s->in_elems, s->in[r]);
    struct algo_args* a = &s->a[r];
    memset(a, 0, sizeof(*a));
    a->coll = (enum algo_coll)s->coll, a->count = c, a->dtype = s->dtype, a->es = s->es, a->root = s->root;
    a->op = (enum elem_op)(s->op < 0 ? 0 : s->op);
    a->send = s->coll == ALGO_COLL_BROADCAST && r != s->root ? NULL : s->in[r];
    a->recv = s->coll == ALGO_COLL_REDUCE && r != s->root ? NULL : s->out[r];
    if (s->op == ELEM_OP_PREMUL) {
      unsigned char sc[8] = {0};
      verify_scalar(&s->spec, r, sc);
      a->scalar = elem_scalar_from(sc, s->dtype);
    }
  }
}

/* Both sides of every pair agree, all ranks agree on maxlen. */
static void check_pairs(struct sim* s, int j) {
  for (int q = 0; q < s->n; q++) {
    const struct gx_plan* pq = &s->p[q][j];
    CHECK(pq->maxlen == s->p[0][j].maxlen);
    for (int r = 0; r < s->n; r++) {
      const struct gx_plan* pr = &s->p[r][j];
      CHECK(pr->send_len[q] <= pq->maxlen && pq->recv_len[r] <= pq->maxlen);
      uint64_t want = pq->mode == GX_COPY ? pq->recv_len[r] : pq->mode == GX_REDUCE ? pq->recv_len[q] : 0;
      CHECK_MSG(pr->send_len[q] == want || (pq->mode == GX_NONE && r == q),
                "%s n=%d count %zu plan %d: rank %d sends %llu bytes to rank %d, which expects %llu",
                algo_coll_name(s->coll), s->n, s->count, j, r, (unsigned long long)pr->send_len[q], q,
                (unsigned long long)want);
    }
  }
}

/* What the kernels do with plan j: every part read (and scaled) first, then copied or reduced. */
static void simulate(struct sim* s, int j) {
  char* parts[MAXN][MAXN];
  for (int r = 0; r < s->n; r++)
    for (int q = 0; q < s->n; q++) {
      const struct gx_plan* p = &s->p[r][j];
      uint64_t len = p->send_len[q];
      parts[r][q] = malloc(len + 1);
      if (len == 0) continue;
      const void* src = p->src + p->send_off[q];
      if (p->scale_send) elem_reduce(parts[r][q], &src, 1, len / s->es, s->dtype, ELEM_OP_PREMUL, 0, &p->scalar);
      else memcpy(parts[r][q], src, len);
    }
  for (int q = 0; q < s->n; q++) {
    const struct gx_plan* p = &s->p[q][j];
    if (p->mode == GX_COPY) {
      for (int r = 0; r < s->n; r++)
        if (p->recv_len[r]) memcpy(p->dst + p->recv_off[r], parts[r][q], p->recv_len[r]);
    } else if (p->mode == GX_REDUCE && p->recv_len[q] > 0) {
      const void* srcs[MAXN];
      for (int r = 0; r < s->n; r++) srcs[r] = parts[r][q];
      enum elem_op op = p->op == ELEM_OP_PREMUL ? ELEM_OP_SUM : (enum elem_op)p->op;
      elem_reduce(p->dst + p->red_off, srcs, s->n, p->recv_len[q] / s->es, s->dtype, op, s->n, NULL);
    }
  }
  for (int r = 0; r < s->n; r++)
    for (int q = 0; q < s->n; q++) free(parts[r][q]);
}

static size_t check_out(struct sim* s, int r) {
  size_t c = s->count, es = s->es, wrong = 0;
  const char* o = s->out[r];
  switch (s->coll) {
    case ALGO_COLL_ALLREDUCE: return verify_check_reduced(&s->spec, 0, c, o);
    case ALGO_COLL_REDUCE: return r == s->root ? verify_check_reduced(&s->spec, 0, c, o) : 0;
    case ALGO_COLL_REDUCESCATTER: return verify_check_reduced(&s->spec, (size_t)r * c, c, o);
    case ALGO_COLL_BROADCAST: return verify_check_copy(&s->spec, s->root, 0, c, o);
    case ALGO_COLL_ALLGATHER:
      for (int q = 0; q < s->n; q++) wrong += verify_check_copy(&s->spec, q, 0, c, o + (size_t)q * c * es);
      return wrong;
    default:
      for (int q = 0; q < s->n; q++) wrong += verify_check_copy(&s->spec, q, (size_t)r * c, c, o + (size_t)q * c * es);
      return wrong;
  }
}

static void run_one(struct sim* s, int two_phase) {
  setup(s);
  int np = 0;
  for (int r = 0; r < s->n; r++) np = gpu_plans(&s->a[r], r, s->n, two_phase, s->p[r]);
  for (int j = 0; j < np; j++) {
    check_pairs(s, j);
    simulate(s, j);
  }
  for (int r = 0; r < s->n; r++) {
    size_t wrong = check_out(s, r);
    CHECK_MSG(wrong == 0, "%s %s %s %s n=%d count %zu two_phase %d: rank %d has %zu wrong elements", algo_coll_name(s->coll),
              elem_dtype_name(s->dtype), s->op >= 0 ? elem_op_name((enum elem_op)s->op) : "-",
              s->inplace ? "in place" : "out of place", s->n, s->count, two_phase, r, wrong);
  }
  for (int r = 0; r < s->n; r++) free(s->bufs[r]);
}

/* The staged kernels' rooted plans (gpu_plan_rooted: broadcast, reduce), split every way: every rank
 * agrees on the slices and maxlen, the slices cover the message (root-free: the root has none; root
 * alone: the others have none), and rank q moving its slice (from the root's input
 * to every output, or reduced from every input into the root's output; all reads first, as each
 * element is read before it is written by the same thread) gives verify.h's outputs. */
static void run_rooted(struct sim* s, enum gpu_rooted_split split) {
  setup(s);
  for (int r = 0; r < s->n; r++) gpu_plan_rooted(&s->a[r], r, s->n, split, &s->p[r][0]);
  uint64_t covered = 0;
  for (int q = 0; q < s->n; q++) {
    const struct gx_plan* pq = &s->p[q][0];
    CHECK(pq->mode == GX_REDUCE && pq->root == s->root && pq->maxlen == s->p[0][0].maxlen);
    CHECK(pq->one_src == (s->coll == ALGO_COLL_BROADCAST) && pq->one_dst == (s->coll == ALGO_COLL_REDUCE));
    CHECK(pq->recv_len[q] <= pq->maxlen && pq->red_off == pq->send_off[q]);
    CHECK(pq->red_off + pq->recv_len[q] <= s->count * s->es);
    CHECK(split != GPU_ROOTED_ROOT_FREE || s->n == 1 || q != s->root || pq->recv_len[q] == 0); /* the root moves none */
    CHECK((split != GPU_ROOTED_ROOT_ALONE && split != GPU_ROOTED_RING) || q == s->root || pq->recv_len[q] == 0); /* the root moves all */
    CHECK(pq->ring == (split == GPU_ROOTED_RING));
    for (int r = 0; r < s->n; r++)
      CHECK(s->p[r][0].send_off[q] == pq->red_off && s->p[r][0].send_len[q] == pq->recv_len[q]);
    covered += pq->recv_len[q];
  }
  CHECK(covered == s->count * s->es);
  char* res[MAXN];
  for (int q = 0; q < s->n; q++) {
    const struct gx_plan* p = &s->p[q][0];
    uint64_t len = p->recv_len[q];
    res[q] = malloc(len + 1);
    if (len == 0) continue;
    if (p->one_src) {
      memcpy(res[q], s->in[s->root] + p->send_off[q], len);
    } else {
      const void* srcs[MAXN];
      for (int r = 0; r < s->n; r++) srcs[r] = s->in[r] + p->send_off[q];
      elem_reduce(res[q], srcs, s->n, len / s->es, s->dtype, (enum elem_op)p->op, s->n, NULL);
    }
  }
  for (int q = 0; q < s->n; q++) {
    const struct gx_plan* p = &s->p[q][0];
    for (int r = 0; r < s->n && p->recv_len[q] > 0; r++)
      if (p->one_src || r == s->root) memcpy(s->out[r] + p->red_off, res[q], p->recv_len[q]);
    free(res[q]);
  }
  for (int r = 0; r < s->n; r++) {
    size_t wrong = check_out(s, r);
    CHECK_MSG(wrong == 0, "rooted %s %s n=%d count %zu root %d: rank %d has %zu wrong elements", algo_coll_name(s->coll),
              s->inplace ? "in place" : "out of place", s->n, s->count, s->root, r, wrong);
  }
  for (int r = 0; r < s->n; r++) free(s->bufs[r]);
}

/* A case: n ranks, root = count % n, verify.h's data from seed. */
static void sim_init(struct sim* s, int n, int coll, int dtype, int op, int inplace, size_t count, uint64_t seed) {
  memset(s, 0, sizeof(*s));
  s->n = n, s->coll = coll, s->dtype = dtype, s->op = op, s->inplace = inplace;
  s->count = count, s->root = (int)(count % (size_t)n);
  s->spec = (struct verify_spec){.dtype = dtype, .op = op, .nranks = n, .seed = seed};
}

#if MSCCLPP_HAVE_CUDA
/* gpu_rooted_split with the default parameters: the root alone on 2 ranks from 4 MiB, root-free for
 * the push chain and for reduces on 3+ ranks from GPU_ROOT_FREE_MIN, even otherwise. */
static void split_rules(struct algo_args* a) {
  a->es = 4;
  for (int coll = ALGO_COLL_BROADCAST; coll <= ALGO_COLL_REDUCE; coll++) {
    a->coll = (enum algo_coll)coll;
    a->count = (4u << 20) / 4;
    CHECK(gpu_rooted_split(a, 2, 0, 0) == GPU_ROOTED_ROOT_ALONE && gpu_rooted_split(a, 3, 0, 0) == GPU_ROOTED_EVEN);
    CHECK(gpu_rooted_split(a, 4, 1, 0) == GPU_ROOTED_ROOT_FREE); /* the chain */
    a->count--;
    CHECK(gpu_rooted_split(a, 2, 0, 0) == GPU_ROOTED_EVEN);
    a->count = GPU_ROOT_FREE_MIN / 4;
    CHECK(gpu_rooted_split(a, 4, 0, 0) == (coll == ALGO_COLL_REDUCE ? GPU_ROOTED_ROOT_FREE : GPU_ROOTED_EVEN));
    CHECK(gpu_rooted_split(a, 2, 0, 0) == GPU_ROOTED_ROOT_ALONE);
    a->count--;
    CHECK(gpu_rooted_split(a, 4, 0, 0) == GPU_ROOTED_EVEN);
    /* the reduce ring, when the call goes zero copy: 3+ ranks from MSCCLPP_ALGO_GPU_REDUCE_RING_MIN
     * (64 MiB), not avg */
    a->count = (64u << 20) / 4;
    int reduce = coll == ALGO_COLL_REDUCE;
    CHECK(gpu_rooted_split(a, 4, 0, 1) == (reduce ? GPU_ROOTED_RING : GPU_ROOTED_EVEN) && gpu_reduce_ring(a, 3) == reduce);
    CHECK(gpu_rooted_split(a, 2, 0, 1) == GPU_ROOTED_ROOT_ALONE && !gpu_reduce_ring(a, 2));
    a->op = ELEM_OP_AVG;
    CHECK(gpu_rooted_split(a, 4, 0, 1) == (reduce ? GPU_ROOTED_ROOT_FREE : GPU_ROOTED_EVEN));
    a->op = ELEM_OP_SUM;
    a->count--;
    CHECK(!gpu_reduce_ring(a, 4));
  }
}

/* The reduce ring's shape (4 ranks, the default bulk slot): 32 KiB steps in as many slots as a
 * block's share of the bulk region holds; a share smaller than a step is one slot; none but the
 * ring plan gets one. */
static void ring_rules(struct gpu_net* g) {
  g->d.nranks = 4;
  g->d.bulk_slot = (16u << 20) / 3 / (16u * 256) * (16u * 256);
  uint64_t share = 2ull * 4 * g->d.bulk_slot / 256;
  struct algo_args a;
  memset(&a, 0, sizeof(a));
  a.coll = ALGO_COLL_REDUCE, a.es = 4, a.count = (256u << 20) / 4, a.root = 3;
  struct gx_plan p;
  struct gx_zc z;
  memset(&z, 0, sizeof(z));
  gpu_plan_rooted(&a, 1, 4, GPU_ROOTED_RING, &p);
  gpu_zc_shape(g, &p, &z);
  CHECK(p.ring && p.maxlen == (256u << 20) && z.ring_sub == 32768 && z.ring_slots == share / 32768);
  CHECK(z.ring_slots >= 2 && z.ring_slots * z.ring_sub <= share);
  g->d.bulk_slot = 16 * 256;
  gpu_zc_shape(g, &p, &z);
  CHECK(z.ring_sub == 2 * 4 * 16 && z.ring_slots == 1);
  gpu_plan_rooted(&a, 1, 4, GPU_ROOTED_ROOT_FREE, &p);
  gpu_zc_shape(g, &p, &z);
  CHECK(!p.ring && z.ring_sub == 0 && z.ring_slots == 0);
  g->d.nranks = 0, g->d.bulk_slot = 0;
}

/* The kernel shape gpu_zc_shape gives a plan, with the default parameters: two passes (staggered)
 * for reductions into the own output from 1 MiB parts; the broadcast's push chain only on the
 * root-free plan, its step a multiple of 16 that covers a block's range in at most 32 steps and is
 * never under GPU_CHAIN_MIN_STEP; and which broadcasts take the chain (eager, 3+ ranks, 16 MiB). */
static void shape_rules(void) {
  struct gpu_net g;
  memset(&g, 0, sizeof(g));
  g.d.nblocks = 256;
  struct gx_plan p;
  struct gx_zc z;
  memset(&p, 0, sizeof(p));
  memset(&z, 0, sizeof(z));
  p.mode = GX_REDUCE;
  z.put_reduced = 1;
  p.maxlen = 1u << 20;
  gpu_zc_shape(&g, &p, &z);
  CHECK(z.two_pass == 2 && z.chain_sub == 0);
  p.maxlen = (1u << 20) - 16;
  gpu_zc_shape(&g, &p, &z);
  CHECK(z.two_pass == 0);
  p.maxlen = 64u << 20, p.one_dst = 1; /* a reduce writes the root's output: one pass */
  gpu_zc_shape(&g, &p, &z);
  CHECK(z.two_pass == 0);

  struct algo_args a;
  memset(&a, 0, sizeof(a));
  a.coll = ALGO_COLL_BROADCAST, a.es = 4, a.count = (16u << 20) / 4, a.root = 1;
  CHECK(gpu_bcast_chain(&a, 4) && gpu_bcast_chain(&a, 3));
  CHECK(!gpu_bcast_chain(&a, 2)); /* 2 ranks: the root's own slice wins (measurements.md) */
  a.captured = 1;
  CHECK(!gpu_bcast_chain(&a, 4));
  a.captured = 0, a.count--;
  CHECK(!gpu_bcast_chain(&a, 4));
  a.count = (256u << 20) / 4;
  for (int root_free = 0; root_free < 2; root_free++) {
    gpu_plan_rooted(&a, 2, 4, root_free ? GPU_ROOTED_ROOT_FREE : GPU_ROOTED_EVEN, &p);
    memset(&z, 0, sizeof(z));
    z.put_reduced = 1;
    gpu_zc_shape(&g, &p, &z);
    CHECK(z.two_pass == 0);
    if (!root_free) {
      CHECK(z.chain_sub == 0);
      continue;
    }
    CHECK(z.chain_sub >= GPU_CHAIN_MIN_STEP && z.chain_sub % 16 == 0 && z.chain_sub * 32 >= z.chunk);
    CHECK(z.chain_sub * 31 < z.chunk); /* not coarser than 32 steps need */
  }
  a.count = 1000;
  gpu_plan_rooted(&a, 0, 4, GPU_ROOTED_ROOT_FREE, &p);
  gpu_zc_shape(&g, &p, &z);
  CHECK(z.chain_sub == GPU_CHAIN_MIN_STEP);
  ring_rules(&g);
  split_rules(&a);
}
#endif

int main(void) {
#if MSCCLPP_HAVE_CUDA
  shape_rules();
#endif
  static const int ns[] = {1, 2, 3, 4, 8};
  static const int dtypes[] = {7, 9, 2, 10, 8, 1, 6, 11};
  static const size_t counts[] = {1, 5, 37, 1001};
  long cases = 0;
  uint64_t seed = 1;
  for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++)
    for (int coll = 0; coll < ALGO_COLL_SENDRECV; coll++)
      for (size_t di = 0; di < sizeof(dtypes) / sizeof(dtypes[0]); di++) {
        int red = coll == ALGO_COLL_ALLREDUCE || coll == ALGO_COLL_REDUCESCATTER || coll == ALGO_COLL_REDUCE;
        for (int op = red ? 0 : -1; op < (red ? ELEM_OP_COUNT : 0); op++)
          for (int inplace = 0; inplace < 2; inplace++)
            for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
              for (int tp = 0; tp < (coll == ALGO_COLL_ALLREDUCE ? 2 : 1); tp++) {
                struct sim s;
                sim_init(&s, ns[ni], coll, dtypes[di], op, inplace, counts[ci], seed++);
                run_one(&s, tp);
                cases++;
                /* the staged plans, every split (premulsum runs the bulk kernel instead) */
                int rooted = algo_coll_rooted(coll) && op != ELEM_OP_PREMUL && tp == 0;
                for (int sp = GPU_ROOTED_EVEN; rooted && sp <= GPU_ROOTED_RING; sp++) {
                  sim_init(&s, ns[ni], coll, dtypes[di], op, inplace, counts[ci], seed++);
                  run_rooted(&s, (enum gpu_rooted_split)sp);
                  cases++;
                }
              }
      }
  printf("gpu_plan: %ld cases OK\n", cases);
  return 0;
}
