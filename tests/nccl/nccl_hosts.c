/* nccl_hosts.c - an NCCL program, unchanged, on ranks spread over hosts (tests/netns/netns_nccl.sh
 * runs it on hosts made of network namespaces, CPU ranks, under mscclpp-run --nnodes). It is a
 * client of nccl.h only; rank 0 passes the ncclUniqueId to the others through a file in the
 * harness's private directory ($NETNS_DIR/nccl.id), as programs pass it through MPI or a store.
 *
 *   nccl_hosts all          every collective, checked element by element: allreduce with each
 *                           operator (sum, prod, max, min, avg, pre-multiplied sum) on several
 *                           datatypes, in place and out of place; broadcast and reduce from every
 *                           root; allgather; reducescatter; alltoall; gather and scatter; send/recv
 *                           in groups between every pair (each size distinct) and as ring shifts;
 *                           a group mixing collectives and send/recv
 *   nccl_hosts fail VICTIM  allreduces in a loop; the victim, after a few, writes its pid to
 *                           $NETNS_DIR/victim.pid for the harness to kill. Every survivor's
 *                           failing call must return a non-success result within 2 s of the kill
 *                           ($NETNS_DIR/event), ncclGetLastError naming the victim, and
 *                           ncclCommGetAsyncError must then report the failure too. */
#include <errno.h>
#include <math.h>
#include <stdint.h>

#include "nccl/nccl_common.h"
#include "netns/netns_event.h"

#define DETECT_LIMIT_S 2.0 /* the bound from the kill to the failing call's return */

static int rank, nranks;

/* ---- elements of any datatype, as doubles (every value used is exact in every type) ---- */

static size_t esize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

static int is_signed(ncclDataType_t t) { return t != ncclUint8 && t != ncclUint32 && t != ncclUint64; }

/* IEEE half bits of v, a small integer (exact: no rounding needed), and back. */
static uint16_t half_bits(double v) {
  if (v == 0) return 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  int e;
  double f = frexp(fabs(v), &e); /* |v| = f * 2^e, f in [0.5, 1) */
  return (uint16_t)(sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)((f * 2 - 1) * 1024));
}

static double half_value(uint16_t h) {
  if ((h & 0x7fff) == 0) return 0;
  double m = 1 + (h & 0x3ff) / 1024.0;
  double v = ldexp(m, ((h >> 10) & 0x1f) - 15);
  return h & 0x8000 ? -v : v;
}

static void put(void* b, ncclDataType_t t, size_t i, double v) {
  switch (t) {
    case ncclInt8: ((int8_t*)b)[i] = (int8_t)v; break;
    case ncclUint8: ((uint8_t*)b)[i] = (uint8_t)v; break;
    case ncclInt32: ((int32_t*)b)[i] = (int32_t)v; break;
    case ncclUint32: ((uint32_t*)b)[i] = (uint32_t)v; break;
    case ncclInt64: ((int64_t*)b)[i] = (int64_t)v; break;
    case ncclUint64: ((uint64_t*)b)[i] = (uint64_t)v; break;
    case ncclFloat16: ((uint16_t*)b)[i] = half_bits(v); break;
    case ncclFloat32: ((float*)b)[i] = (float)v; break;
    case ncclFloat64: ((double*)b)[i] = v; break;
    case ncclBfloat16: {
      float f = (float)v;
      uint32_t u;
      memcpy(&u, &f, 4);
      ((uint16_t*)b)[i] = (uint16_t)(u >> 16); /* exact: small integers */
      break;
    }
    default: NFAIL("datatype %d not handled", (int)t);
  }
}

static double get(const void* b, ncclDataType_t t, size_t i) {
  switch (t) {
    case ncclInt8: return ((const int8_t*)b)[i];
    case ncclUint8: return ((const uint8_t*)b)[i];
    case ncclInt32: return ((const int32_t*)b)[i];
    case ncclUint32: return ((const uint32_t*)b)[i];
    case ncclInt64: return (double)((const int64_t*)b)[i];
    case ncclUint64: return (double)((const uint64_t*)b)[i];
    case ncclFloat16: return half_value(((const uint16_t*)b)[i]);
    case ncclFloat32: return ((const float*)b)[i];
    case ncclFloat64: return ((const double*)b)[i];
    case ncclBfloat16: {
      uint32_t u = (uint32_t)((const uint16_t*)b)[i] << 16;
      float f;
      memcpy(&f, &u, 4);
      return f;
    }
    default: NFAIL("datatype %d not handled", (int)t);
  }
}

static void* xalloc(size_t n, ncclDataType_t t) {
  void* p = calloc(n ? n : 1, esize(t));
  NCHECK(p != NULL);
  return p;
}

static const char* dt_name(ncclDataType_t t) {
  static const char* names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"};
  return (int)t >= 0 && (int)t < 10 ? names[t] : "?";
}

/* ---- what rank r holds at element i for each operator, and the reduction ---- */

enum op { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_AVG, OP_PREMUL, NOPS };
static const char* op_names[NOPS] = {"sum", "prod", "max", "min", "avg", "premulsum"};

static double value(enum op o, ncclDataType_t t, int r, size_t i) {
  switch (o) {
    case OP_SUM: return (r + 1) + (double)(i % 7);
    case OP_PROD: return 1 + (double)((r + i) % 2);
    case OP_MAX: case OP_MIN: return (is_signed(t) && r % 2 ? -1 : 1) * ((r + 1) * 3 + (double)(i % 5));
    case OP_AVG: return nranks * ((r + 1) + (double)(i % 3)); /* the sum divides by nranks */
    case OP_PREMUL: return 1 + (double)(i % 3);              /* times the scalar r + 1 */
    case NOPS: break;
  }
  return 0;
}

static double reduced(enum op o, ncclDataType_t t, size_t i) {
  double acc = value(o, t, 0, i); /* rank 0's scalar is 1 */
  for (int r = 1; r < nranks; r++) {
    double v = value(o, t, r, i);
    switch (o) {
      case OP_SUM: case OP_AVG: acc += v; break;
      case OP_PREMUL: acc += v * (r + 1); break;
      case OP_PROD: acc *= v; break;
      case OP_MAX: acc = fmax(acc, v); break;
      case OP_MIN: acc = fmin(acc, v); break;
      case NOPS: break;
    }
  }
  return o == OP_AVG ? acc / nranks : acc;
}

/* The NCCL operator for o; a pre-multiplied sum is made with this rank's scalar (rank + 1). */
static ncclRedOp_t make_op(enum op o, ncclDataType_t t, ncclComm_t comm) {
  static const ncclRedOp_t base[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  if (o != OP_PREMUL) return base[o];
  char scalar[8];
  put(scalar, t, 0, rank + 1);
  ncclRedOp_t op;
  NOK(ncclRedOpCreatePreMulSum(&op, scalar, t, ncclScalarHostImmediate, comm));
  return op;
}

static void check(const char* what, const void* b, ncclDataType_t t, size_t i, double want) {
  double got = get(b, t, i);
  if (got != want) NFAIL("rank %d: %s (%s) element %zu: %g, want %g", rank, what, dt_name(t), i, got, want);
}

/* ---- the collectives ---- */

static void allreduce(ncclComm_t comm, enum op o, ncclDataType_t t, size_t n, int inplace) {
  char* in = xalloc(n, t);
  char* out = inplace ? in : xalloc(n, t);
  for (size_t i = 0; i < n; i++) put(in, t, i, value(o, t, rank, i));
  ncclRedOp_t op = make_op(o, t, comm);
  NOK(ncclAllReduce(in, out, n, t, op, comm, NULL));
  if (o == OP_PREMUL) NOK(ncclRedOpDestroy(op, comm));
  char what[64];
  snprintf(what, sizeof(what), "allreduce %s of %zu%s", op_names[o], n, inplace ? " in place" : "");
  for (size_t i = 0; i < n; i++) check(what, out, t, i, reduced(o, t, i));
  if (!inplace) free(out);
  free(in);
}

static void every_allreduce(ncclComm_t comm) {
  static const ncclDataType_t types[] = {ncclInt8, ncclUint8, ncclInt32, ncclUint64, ncclFloat16,
                                         ncclFloat32, ncclFloat64, ncclBfloat16};
  for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
    /* the last just above 8 KiB: the hierarchical algorithm's range (tuning/algo.tsv) */
    size_t counts[] = {1, 999, 8192 / esize(types[k]) + 1};
    for (int o = 0; o < NOPS; o++)
      for (size_t c = 0; c < 3; c++) allreduce(comm, (enum op)o, types[k], counts[c], (int)((k + o + c) % 2));
  }
  allreduce(comm, OP_SUM, ncclFloat32, 100000, 0); /* many chunks of the pipelines */
  allreduce(comm, OP_MAX, ncclInt32, 65537, 1);
}

static void broadcast_and_reduce(ncclComm_t comm) {
  enum { N = 1001 };
  for (int root = 0; root < nranks; root++) {
    float* b = xalloc(N, ncclFloat32);
    for (size_t i = 0; i < N; i++) b[i] = rank == root ? (float)(root * 100 + (int)(i % 50)) : -1.0f;
    NOK(ncclBroadcast(b, b, N, ncclFloat32, root, comm, NULL));
    for (size_t i = 0; i < N; i++) check("broadcast", b, ncclFloat32, i, root * 100 + (double)(i % 50));
    for (int o = OP_SUM; o <= OP_MIN; o += 2) { /* sum and max */
      int32_t *in = xalloc(N, ncclInt32), *out = xalloc(N, ncclInt32);
      for (size_t i = 0; i < N; i++) in[i] = (int32_t)value((enum op)o, ncclInt32, rank, i);
      NOK(ncclReduce(in, out, N, ncclInt32, o == OP_SUM ? ncclSum : ncclMax, root, comm, NULL));
      for (size_t i = 0; rank == root && i < N; i++) check("reduce", out, ncclInt32, i, reduced((enum op)o, ncclInt32, i));
      free(in), free(out);
    }
    free(b);
  }
}

static void gathers(ncclComm_t comm) {
  static const size_t counts[] = {1, 777};
  for (int c = 0; c < 2; c++) {
    size_t n = counts[c];
    ncclDataType_t t = c ? ncclBfloat16 : ncclInt32;
    char *in = xalloc(n, t), *out = xalloc(n * (size_t)nranks, t);
    for (size_t i = 0; i < n; i++) put(in, t, i, rank * 10 + (double)(i % 9));
    NOK(ncclAllGather(in, out, n, t, comm, NULL));
    for (int r = 0; r < nranks; r++)
      for (size_t i = 0; i < n; i++) check("allgather", out, t, (size_t)r * n + i, r * 10 + (double)(i % 9));
    free(in), free(out);
  }
  for (int c = 0; c < 2; c++) { /* reducescatter: sum of int64, max of double */
    size_t n = counts[c];
    ncclDataType_t t = c ? ncclFloat64 : ncclInt64;
    enum op o = c ? OP_MAX : OP_SUM;
    char *in = xalloc(n * (size_t)nranks, t), *out = xalloc(n, t);
    for (size_t i = 0; i < n * (size_t)nranks; i++) put(in, t, i, value(o, t, rank, i));
    NOK(ncclReduceScatter(in, out, n, t, o == OP_SUM ? ncclSum : ncclMax, comm, NULL));
    for (size_t i = 0; i < n; i++) check("reducescatter", out, t, i, reduced(o, t, (size_t)rank * n + i));
    free(in), free(out);
  }
}

/* Element i of the block rank `from` sends rank `to`. */
static int64_t p2p_val(int from, int to, size_t i) { return (int64_t)from * 1000000 + to * 10000 + (int64_t)(i % 9999); }

static void alltoall_gather_scatter(ncclComm_t comm) {
  enum { C = 333 };
  int64_t *in = xalloc((size_t)C * nranks, ncclInt64), *out = xalloc((size_t)C * nranks, ncclInt64);
  for (int p = 0; p < nranks; p++)
    for (size_t i = 0; i < C; i++) in[(size_t)p * C + i] = p2p_val(rank, p, i);
  NOK(ncclAlltoAll(in, out, C, ncclInt64, comm, NULL));
  for (int p = 0; p < nranks; p++)
    for (size_t i = 0; i < C; i++) check("alltoall", out, ncclInt64, (size_t)p * C + i, (double)p2p_val(p, rank, i));
  for (int root = 0; root < nranks; root++) {
    memset(out, 0, (size_t)C * nranks * sizeof(*out));
    NOK(ncclGather(in, out, C, ncclInt64, root, comm, NULL)); /* each rank's first block */
    for (int p = 0; rank == root && p < nranks; p++)
      for (size_t i = 0; i < C; i++) check("gather", out, ncclInt64, (size_t)p * C + i, (double)p2p_val(p, 0, i));
    NOK(ncclScatter(in, out, C, ncclInt64, root, comm, NULL)); /* the root's block for each rank */
    for (size_t i = 0; i < C; i++) check("scatter", out, ncclInt64, i, (double)p2p_val(root, rank, i));
  }
  free(in), free(out);
}

/* The count rank `from` sends rank `to`: distinct for every ordered pair. */
static size_t pair_count(int from, int to) { return 100 + 37 * (size_t)from + 11 * (size_t)to; }

/* One group: a send to and a receive from every rank (itself too), sizes distinct per pair. */
static void p2p_all_pairs(ncclComm_t comm) {
  int64_t** in = calloc((size_t)nranks, sizeof(*in));
  int64_t** out = calloc((size_t)nranks, sizeof(*out));
  NCHECK(in && out);
  NOK(ncclGroupStart());
  for (int p = 0; p < nranks; p++) {
    size_t ns = pair_count(rank, p), nr = pair_count(p, rank);
    in[p] = xalloc(ns, ncclInt64), out[p] = xalloc(nr, ncclInt64);
    for (size_t i = 0; i < ns; i++) in[p][i] = p2p_val(rank, p, i);
    NOK(ncclSend(in[p], ns, ncclInt64, p, comm, NULL));
    NOK(ncclRecv(out[p], nr, ncclInt64, p, comm, NULL));
  }
  NOK(ncclGroupEnd());
  for (int p = 0; p < nranks; p++) {
    for (size_t i = 0; i < pair_count(p, rank); i++) check("send/recv pairs", out[p], ncclInt64, i, (double)p2p_val(p, rank, i));
    free(in[p]), free(out[p]);
  }
  free(in), free(out);
}

/* A group per distance d: send to rank + d, receive from rank - d (every pair, both ways). */
static void p2p_shifts(ncclComm_t comm) {
  enum { N = 5000 };
  uint8_t *s = xalloc(N, ncclUint8), *r = xalloc(N, ncclUint8);
  for (int d = 1; d < nranks; d++) {
    int to = (rank + d) % nranks, from = (rank + nranks - d) % nranks;
    for (size_t i = 0; i < N; i++) s[i] = (uint8_t)(rank * 31 + d * 7 + i);
    NOK(ncclGroupStart());
    NOK(ncclRecv(r, N, ncclUint8, from, comm, NULL));
    NOK(ncclSend(s, N, ncclUint8, to, comm, NULL));
    NOK(ncclGroupEnd());
    for (size_t i = 0; i < N; i++) check("send/recv shift", r, ncclUint8, i, (uint8_t)(from * 31 + d * 7 + i));
  }
  free(s), free(r);
}

/* Collectives and send/recv in one group, as PyTorch coalesces work. */
static void mixed_group(ncclComm_t comm) {
  enum { AR = 3000, AG = 100, SR = 777 };
  float* ar = xalloc(AR, ncclFloat32);
  int32_t *ag_in = xalloc(AG, ncclInt32), *ag_out = xalloc((size_t)AG * nranks, ncclInt32);
  int64_t *s = xalloc(SR, ncclInt64), *rv = xalloc(SR, ncclInt64);
  int to = (rank + 1) % nranks, from = (rank + nranks - 1) % nranks;
  for (size_t i = 0; i < AR; i++) ar[i] = (float)value(OP_SUM, ncclFloat32, rank, i);
  for (size_t i = 0; i < AG; i++) ag_in[i] = rank * 1000 + (int32_t)i;
  for (size_t i = 0; i < SR; i++) s[i] = p2p_val(rank, to, i);
  NOK(ncclGroupStart());
  NOK(ncclAllReduce(ar, ar, AR, ncclFloat32, ncclSum, comm, NULL));
  NOK(ncclSend(s, SR, ncclInt64, to, comm, NULL));
  NOK(ncclAllGather(ag_in, ag_out, AG, ncclInt32, comm, NULL));
  NOK(ncclRecv(rv, SR, ncclInt64, from, comm, NULL));
  NOK(ncclGroupEnd());
  for (size_t i = 0; i < AR; i++) check("grouped allreduce", ar, ncclFloat32, i, reduced(OP_SUM, ncclFloat32, i));
  for (int r = 0; r < nranks; r++)
    for (size_t i = 0; i < AG; i++) check("grouped allgather", ag_out, ncclInt32, (size_t)r * AG + i, r * 1000 + (double)i);
  for (size_t i = 0; i < SR; i++) check("grouped recv", rv, ncclInt64, i, (double)p2p_val(from, rank, i));
  free(ar), free(ag_in), free(ag_out), free(s), free(rv);
}

static ncclComm_t init(const char* dir) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/nccl.id", dir);
  ncclUniqueId id = share_id(rank, path);
  ncclComm_t comm;
  NOK(ncclCommInitRank(&comm, nranks, id, rank));
  int c = -1, r = -1;
  NOK(ncclCommCount(comm, &c));
  NOK(ncclCommUserRank(comm, &r));
  NCHECK(c == nranks && r == rank);
  return comm;
}

/* Rank 0 prints the time each part took (where a slow run spends it). */
static void timed(const char* what, void (*part)(ncclComm_t), ncclComm_t comm) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  part(comm);
  clock_gettime(CLOCK_MONOTONIC, &b);
  if (rank == 0) printf("rank 0: %s: %.3f s\n", what, (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9);
}

static void run_all(const char* dir) {
  ncclComm_t comm = init(dir);
  timed("allreduce", every_allreduce, comm);
  timed("broadcast, reduce", broadcast_and_reduce, comm);
  timed("allgather, reducescatter", gathers, comm);
  timed("alltoall, gather, scatter", alltoall_gather_scatter, comm);
  timed("send/recv every pair", p2p_all_pairs, comm);
  timed("send/recv shifts", p2p_shifts, comm);
  timed("grouped", mixed_group, comm);
  ncclResult_t async = ncclInProgress;
  NOK(ncclCommGetAsyncError(comm, &async));
  NCHECK(async == ncclSuccess);
  NOK(ncclCommDestroy(comm));
  printf("rank %d of %d: every NCCL call across hosts exact\n", rank, nranks);
}

/* ---- a rank killed ---- */

/* The event's time from $NETNS_DIR/event (written when the harness's kill or cut returned). */
static double event_time(const char* dir) {
  double t = netns_event_time(dir);
  if (t < 0) NFAIL("rank %d: no event time in %s/event: this rank failed before the harness acted", rank, dir);
  return t;
}

static void announce(const char* dir) {
  char tmp[4096], path[4096];
  snprintf(tmp, sizeof(tmp), "%s/victim.tmp", dir);
  snprintf(path, sizeof(path), "%s/victim.pid", dir);
  FILE* f = fopen(tmp, "we");
  if (!f) NFAIL("cannot write %s: %s", tmp, strerror(errno));
  fprintf(f, "%d\n", (int)getpid());
  fclose(f);
  NCHECK(rename(tmp, path) == 0);
}

/* A survivor's failed call: a failure result, within the bound, naming the victim; the
 * communicator's async error says so too, and abort returns. */
static int judge(ncclComm_t comm, int victim, ncclResult_t res, const char* dir) {
  double at = netns_boot_now();
  char e[1024], who[32];
  snprintf(e, sizeof(e), "%s", ncclGetLastError(comm));
  double late = at - event_time(dir);
  printf("rank %d: ncclAllReduce returned %d (%s) %.2f s after the kill: %s\n", rank, (int)res, ncclGetErrorString(res),
         late, e);
  if (res != ncclRemoteError && res != ncclSystemError) NFAIL("rank %d: result %d, want a remote or system error", rank, (int)res);
  snprintf(who, sizeof(who), "rank %d ", victim);
  if (!strstr(e, who)) NFAIL("rank %d: the error does not name rank %d: %s", rank, victim, e);
  if (late >= DETECT_LIMIT_S) NFAIL("rank %d: failed %.2f s after the kill (limit %.1f s)", rank, late, DETECT_LIMIT_S);
  ncclResult_t async = ncclSuccess;
  NOK(ncclCommGetAsyncError(comm, &async));
  if (async != res) NFAIL("rank %d: ncclCommGetAsyncError reports %d after the failure, want %d", rank, (int)async, (int)res);
  double t0 = netns_boot_now();
  NOK(ncclCommAbort(comm));
  if (netns_boot_now() - t0 >= DETECT_LIMIT_S) NFAIL("rank %d: ncclCommAbort took %.2f s", rank, netns_boot_now() - t0);
  nanosleep(&(struct timespec){1, 0}, NULL); /* the others fail on their own, not from our exit */
  return 0;
}

static int run_fail(const char* dir, int victim) {
  if (victim <= 0 || victim >= nranks) NFAIL("victim %d is not a rank of %d other than the root", victim, nranks);
  ncclComm_t comm = init(dir);
  enum { N = 4096 };
  static float in[N], out[N];
  for (int i = 0; i < N; i++) in[i] = (float)rank;
  double ready_at = -1;
  for (int it = 0;; it++) {
    if (rank == victim && it == 5) announce(dir);
    if (it == 5) ready_at = netns_boot_now();
    ncclResult_t res = ncclAllReduce(in, out, N, ncclFloat32, ncclSum, comm, NULL);
    if (res != ncclSuccess) return judge(comm, victim, res, dir);
    float want = (float)nranks * (float)(nranks - 1) / 2.0f;
    if (out[7] != want) NFAIL("rank %d: iteration %d: %g, want %g", rank, it, (double)out[7], (double)want);
    if (ready_at >= 0 && netns_boot_now() - ready_at > 20.0) NFAIL("rank %d: the victim's fate was never noticed", rank);
  }
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  rank = env_int("MSCCLPP_RANK", -1), nranks = env_int("MSCCLPP_WORLD_SIZE", -1);
  const char* dir = getenv("NETNS_DIR");
  if (rank < 0 || nranks < 1 || !dir) NFAIL("run under tests/netns/netns_nccl.sh (MSCCLPP_RANK, MSCCLPP_WORLD_SIZE, NETNS_DIR)");
  if (argc == 2 && !strcmp(argv[1], "all")) run_all(dir);
  else if (argc == 3 && !strcmp(argv[1], "fail")) return run_fail(dir, atoi(argv[2]));
  else NFAIL("usage: nccl_hosts all | nccl_hosts fail VICTIM");
  return 0;
}
