/* Every collective x datatype x operator x in/out of place at the given counts, checked element by
 * element against src/algo/verify.c's exact inputs (every rank recomputes every other rank's
 * input). Roots rotate; pre-multiplied sums alternate between host-immediate and device-resident
 * scalars; out-of-place outputs start as garbage; non-root ranks pass NULL where NCCL allows it.
 *
 *   coll_check [-c COLLS] [-d DTYPES] [-o OPS] [-n COUNTS] [-p in|out|both] [-r REPEAT] [-H HOSTS]
 *              [-M MAP] [-S hier|flat]
 * COLLS, DTYPES, OPS: comma lists of names or "all" (default); COUNTS: comma list (default
 * 0,1,7,1000). -H: rank r acts as host r % HOSTS (MSCCLPP_HOST_ID), so Auto connects ranks of
 * different "hosts" over tcp; -M: rank r acts as host MAP[r] (a comma list with an entry per rank,
 * e.g. 0,0,0,1: uneven hosts). -S: before the checks, the selection (MSCCLPP_ALGO, else the table)
 * must pick the hierarchical algorithm (name ending in _hier) of every chosen collective that has
 * one, or must pick none of them (flat). Set MSCCLPP_ALGO_CPU_SCRATCH small to make the counts loop
 * through the pipeline. */
#include <getopt.h>

#include "algo/algo.h"
#include "algo/verify.h"
#include "transport_mp.h"

#define MAX_COUNTS 16

struct opts {
  unsigned colls, dtypes, ops;
  size_t counts[MAX_COUNTS];
  int ncounts;
  int places; /* bit 0: out of place, bit 1: in place */
  int repeat;
  int hosts;
  const char* map;  /* -M */
  const char* want; /* -S */
};

/* A comma list of names (name_of(i) for i < n) into a bit mask; "all" is every bit. */
static unsigned parse_mask(const char* arg, int n, const char* (*name_of)(int)) {
  if (strcmp(arg, "all") == 0) return (1u << n) - 1;
  unsigned mask = 0;
  char buf[512];
  snprintf(buf, sizeof(buf), "%s", arg);
  for (char* save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int i = 0;
    while (i < n && strcmp(tok, name_of(i)) != 0) i++;
    if (i == n) TEST_FAIL("unknown name '%s'", tok);
    mask |= 1u << i;
  }
  return mask;
}

static const char* coll_name(int i) { return algo_coll_name((enum algo_coll)i); }
static const char* op_name(int i) { return elem_op_name((enum elem_op)i); }

static void parse(int argc, char** argv, struct opts* o) {
  *o = (struct opts){.colls = (1u << ALGO_COLL_SENDRECV) - 1, .dtypes = (1u << ELEM_DTYPE_COUNT) - 1,
                     .ops = (1u << ELEM_OP_COUNT) - 1, .counts = {0, 1, 7, 1000}, .ncounts = 4, .places = 3, .repeat = 1};
  for (int c; (c = getopt(argc, argv, "c:d:o:n:p:r:H:M:S:")) != -1;) {
    if (c == 'c') o->colls = parse_mask(optarg, ALGO_COLL_SENDRECV, coll_name);
    else if (c == 'd') o->dtypes = parse_mask(optarg, ELEM_DTYPE_COUNT, elem_dtype_name);
    else if (c == 'o') o->ops = parse_mask(optarg, ELEM_OP_COUNT, op_name);
    else if (c == 'p') o->places = strcmp(optarg, "in") == 0 ? 2 : strcmp(optarg, "out") == 0 ? 1 : 3;
    else if (c == 'r') o->repeat = atoi(optarg);
    else if (c == 'H') o->hosts = atoi(optarg);
    else if (c == 'M') o->map = optarg;
    else if (c == 'S') o->want = optarg;
    else if (c == 'n') {
      o->ncounts = 0;
      for (char* save = NULL, *tok = strtok_r(optarg, ",", &save); tok && o->ncounts < MAX_COUNTS; tok = strtok_r(NULL, ",", &save))
        o->counts[o->ncounts++] = strtoull(tok, NULL, 10);
    } else TEST_FAIL("usage: coll_check [-c COLLS] [-d DTYPES] [-o OPS] [-n COUNTS] [-p in|out|both] [-r REPEAT]");
  }
}

struct call {
  int coll, dtype, op, root, inplace;
  size_t count;
  struct verify_spec spec;
};

static int is_reduction(int coll) {
  return coll == ALGO_COLL_ALLREDUCE || coll == ALGO_COLL_REDUCESCATTER || coll == ALGO_COLL_REDUCE;
}

/* Input and output sizes of a call in elements (count's meaning follows the API). */
static void sizes(const struct call* c, int n, size_t* in, size_t* out) {
  int multi_in = c->coll == ALGO_COLL_REDUCESCATTER || c->coll == ALGO_COLL_ALLTOALL;
  int multi_out = c->coll == ALGO_COLL_ALLGATHER || c->coll == ALGO_COLL_ALLTOALL;
  *in = c->count * (multi_in ? (size_t)n : 1);
  *out = c->count * (multi_out ? (size_t)n : 1);
}

static mscclppResult_t issue(mscclppComm_t comm, const struct call* c, const void* in, void* out, mscclppRedOp_t op) {
  mscclppDataType_t t = (mscclppDataType_t)c->dtype;
  switch (c->coll) {
    case ALGO_COLL_ALLREDUCE: return mscclppAllReduce(in, out, c->count, t, op, comm, NULL);
    case ALGO_COLL_ALLGATHER: return mscclppAllGather(in, out, c->count, t, comm, NULL);
    case ALGO_COLL_REDUCESCATTER: return mscclppReduceScatter(in, out, c->count, t, op, comm, NULL);
    case ALGO_COLL_BROADCAST: return mscclppBroadcast(in, out, c->count, t, c->root, comm, NULL);
    case ALGO_COLL_REDUCE: return mscclppReduce(in, out, c->count, t, op, c->root, comm, NULL);
    default: return mscclppAllToAll(in, out, c->count, t, comm, NULL);
  }
}

/* Wrong elements of this rank's output. */
static size_t check(const struct call* c, int rank, int n, const char* out) {
  size_t es = mscclppDataTypeSize((mscclppDataType_t)c->dtype), wrong = 0;
  switch (c->coll) {
    case ALGO_COLL_ALLREDUCE: return verify_check_reduced(&c->spec, 0, c->count, out);
    case ALGO_COLL_REDUCE: return rank == c->root ? verify_check_reduced(&c->spec, 0, c->count, out) : 0;
    case ALGO_COLL_REDUCESCATTER: return verify_check_reduced(&c->spec, (size_t)rank * c->count, c->count, out);
    case ALGO_COLL_BROADCAST: return verify_check_copy(&c->spec, c->root, 0, c->count, out);
    case ALGO_COLL_ALLGATHER:
      for (int q = 0; q < n; q++) wrong += verify_check_copy(&c->spec, q, 0, c->count, out + (size_t)q * c->count * es);
      return wrong;
    default:
      for (int q = 0; q < n; q++)
        wrong += verify_check_copy(&c->spec, q, (size_t)rank * c->count, c->count, out + (size_t)q * c->count * es);
      return wrong;
  }
}

static void run_call(mscclppComm_t comm, int rank, int n, const struct call* c) {
  size_t es = mscclppDataTypeSize((mscclppDataType_t)c->dtype), nin, nout;
  sizes(c, n, &nin, &nout);
  size_t bytes = (nin > nout ? nin : nout) * es + 8;
  char* out = malloc(bytes);
  char* in = c->inplace ? out : malloc(bytes);
  CHECK(out && in);
  memset(out, 0xa5, bytes);
  char* at = in; /* where this rank's input goes */
  if (c->inplace && c->coll == ALGO_COLL_ALLGATHER) at = out + (size_t)rank * c->count * es;
  char* result = out;
  if (c->inplace && c->coll == ALGO_COLL_REDUCESCATTER) result = out + (size_t)rank * c->count * es;
  if (c->coll != ALGO_COLL_BROADCAST || rank == c->root) verify_fill(&c->spec, rank, 0, nin, at);
  mscclppRedOp_t op = (mscclppRedOp_t)c->op;
  unsigned char scalar[8] = {0};
  if (c->op == ELEM_OP_PREMUL) {
    verify_scalar(&c->spec, rank, scalar);
    int immediate = (int)(c->spec.seed & 1);
    CHECK_OK(mscclppRedOpCreatePreMulSum(&op, scalar, (mscclppDataType_t)c->dtype,
                                         immediate ? mscclppScalarHostImmediate : mscclppScalarDevice, comm));
    if (immediate) memset(scalar, 0x55, sizeof(scalar)); /* must not matter any more */
  }
  int nonroot = (c->coll == ALGO_COLL_BROADCAST || c->coll == ALGO_COLL_REDUCE) && rank != c->root;
  const void* sendp = (nonroot && c->coll == ALGO_COLL_BROADCAST && !c->inplace) ? NULL : at;
  void* recvp = (nonroot && c->coll == ALGO_COLL_REDUCE && !c->inplace) ? NULL : result;
  mscclppResult_t res = issue(comm, c, sendp, recvp, op);
  if (res != mscclppSuccess)
    TEST_FAIL("rank %d: %s %s %s count %zu %s root %d failed: %s", rank, coll_name(c->coll), elem_dtype_name(c->dtype),
              is_reduction(c->coll) ? op_name(c->op) : "-", c->count, c->inplace ? "in-place" : "out-of-place", c->root,
              mscclppGetLastError());
  if (c->op == ELEM_OP_PREMUL) CHECK_OK(mscclppRedOpDestroy(op, comm));
  size_t wrong = (nonroot && c->coll == ALGO_COLL_REDUCE) ? 0 : check(c, rank, n, result);
  if (wrong != 0)
    TEST_FAIL("rank %d of %d: %s %s %s count %zu %s root %d: %zu wrong elements", rank, n, coll_name(c->coll),
              elem_dtype_name(c->dtype), is_reduction(c->coll) ? op_name(c->op) : "-", c->count,
              c->inplace ? "in-place" : "out-of-place", c->root, wrong);
  if (!c->inplace) free(in);
  free(out);
}

/* -M: entry `rank` of the comma list map (the host this rank acts as). */
static int host_from_map(const char* map, int rank) {
  const char* p = map;
  for (int i = 0; i < rank && p != NULL; i++) {
    p = strchr(p, ',');
    if (p) p++;
  }
  if (p == NULL || *p < '0' || *p > '9') TEST_FAIL("-M %s has no host for rank %d", map, rank);
  return atoi(p);
}

/* -S: the algorithm the selection picks for each chosen collective (64 KiB and 64 MiB of floats)
 * is hierarchical (want "hier") or not ("flat"), for collectives with a hierarchical algorithm. */
static void check_selection(mscclppComm_t comm, const struct opts* o) {
  struct algo_comm* ac;
  CHECK_OK(algo_comm_get((struct mscclppComm*)comm, &ac));
  int hier = strcmp(o->want, "hier") == 0;
  if (!hier && strcmp(o->want, "flat") != 0) TEST_FAIL("-S takes hier or flat, not '%s'", o->want);
  for (int coll = 0; coll < ALGO_COLL_SENDRECV; coll++) {
    if (!(o->colls >> coll & 1) || coll == ALGO_COLL_REDUCE)
      continue;
    for (size_t bytes = (size_t)64 << 10; bytes <= ((size_t)64 << 20); bytes <<= 10) {
      if (coll == ALGO_COLL_ALLTOALL && bytes > ((size_t)1 << 20)) continue; /* hier up to 1 MiB (tuning/algo.tsv) */
      const struct algo_desc* d = NULL;
      CHECK_OK(algo_select((enum algo_coll)coll, mscclppRankCpu, ac->nranks, ac->nhosts, bytes, 7, 0, &d));
      const char* s = d ? strstr(d->name, "_hier") : NULL;
      CHECK_MSG((s != NULL) == hier, "%s of %zu bytes on %d ranks of %d hosts: selection picked %s, expected %s", coll_name(coll),
                bytes, ac->nranks, ac->nhosts, d ? d->name : "nothing", hier ? "a _hier algorithm" : "a flat one");
    }
  }
}

int main(int argc, char** argv) {
  struct opts o;
  parse(argc, argv, &o);
  int env_rank = atoi(getenv("MSCCLPP_RANK") ? getenv("MSCCLPP_RANK") : "0");
  if (o.hosts > 0 || o.map != NULL) {
    char id[32];
    snprintf(id, sizeof(id), "coll-host-%d", o.map ? host_from_map(o.map, env_rank) : env_rank % o.hosts);
    setenv("MSCCLPP_HOST_ID", id, 1);
  }
  int rank, n;
  mscclppComm_t comm = tmp_init(&rank, &n);
  if (o.want != NULL) check_selection(comm, &o);
  double t0 = tmp_now();
  long calls = 0;
  for (int rep = 0; rep < o.repeat; rep++)
    for (int coll = 0; coll < ALGO_COLL_SENDRECV; coll++) {
      if (!(o.colls >> coll & 1)) continue;
      for (int dtype = 0; dtype < ELEM_DTYPE_COUNT; dtype++) {
        if (!(o.dtypes >> dtype & 1)) continue;
        for (int op = 0; op < ELEM_OP_COUNT; op++) {
          if (is_reduction(coll) ? !(o.ops >> op & 1) : op > 0) continue;
          for (int ci = 0; ci < o.ncounts; ci++)
            for (int inplace = 0; inplace < 2; inplace++) {
              if (!(o.places >> inplace & 1)) continue;
              struct call c = {.coll = coll, .dtype = dtype, .op = is_reduction(coll) ? op : -1, .count = o.counts[ci],
                               .inplace = inplace, .root = (int)(calls % n)};
              c.spec = (struct verify_spec){.dtype = dtype, .op = c.op, .nranks = n, .seed = 1000003u * (uint64_t)calls + 7};
              run_call(comm, rank, n, &c);
              calls++;
            }
        }
      }
    }
  CHECK_OK(mscclppBootstrapBarrier(comm));
  if (rank == 0) printf("coll_check: %d ranks, %ld calls OK in %.2f s\n", n, calls, tmp_now() - t0);
  CHECK_OK(mscclppCommDestroy(comm));
  return 0;
}
