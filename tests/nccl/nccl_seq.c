/* nccl_seq.c - the call sequences of NCCL's clients, on CPU ranks (host buffers, NULL streams),
 * against libmscclpp_nccl.so, every result checked:
 *
 *   nccl_seq pytorch IDFILE   PyTorch's: version, id through a store, a nonblocking
 *                             ncclCommInitRankConfig polled with ncclCommGetAsyncError, coalesced
 *                             groups of collectives and send/recv, all_to_all as grouped send/recv,
 *                             avg and pre-multiplied sums, ncclCommSplit for new_group (NOCOLOR
 *                             included), registration, finalize + destroy and abort
 *   nccl_seq cupy IDFILE      CuPy's: init, queries, bcast / reduce / broadcast / gather / scatter
 *   nccl_seq errors IDFILE    what wrong calls return and say
 *   nccl_seq shrink IDFILE    ncclCommShrink without the last rank; ncclCommInitRankScalable
 *   nccl_seq vllm IDFILE      vLLM's: blocking init, each collective alone, a send/recv hand-off
 *                             between two ranks, symmetric windows around reused buffers
 *
 * under mscclpp-run -n N (IDFILE gets the launch's port appended: ids of earlier runs are never
 * read). */
#include <math.h>
#include <stdint.h>

#include "nccl/nccl_common.h"

static int rank, nranks;

static ncclComm_t init_blocking(const char* path) {
  ncclUniqueId id = share_id(rank, path);
  ncclComm_t comm;
  NOK(ncclCommInitRank(&comm, nranks, id, rank));
  return comm;
}

/* A nonblocking init, polled as PyTorch's watchdog polls it. */
static ncclComm_t init_nonblocking(const char* path) {
  ncclUniqueId id = share_id(rank, path);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&comm, nranks, id, rank, &cfg);
  NCHECK(r == ncclSuccess || r == ncclInProgress);
  NCHECK(comm != NULL);
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 60000 && state == ncclInProgress; i++) {
    NOK(ncclCommGetAsyncError(comm, &state));
    if (state == ncclInProgress) nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
  }
  NCHECK(state == ncclSuccess);
  return comm;
}

static void check_queries(ncclComm_t comm, int want_rank, int want_n) {
  int c = -1, r = -1, d = -2;
  NOK(ncclCommCount(comm, &c));
  NOK(ncclCommUserRank(comm, &r));
  NOK(ncclCommCuDevice(comm, &d));
  NCHECK(c == want_n && r == want_rank && d == -1); /* CPU ranks have no device */
}

/* One coalesced group: allreduce (float sum), allgather (int32), reducescatter (double max) and a
 * ring send/recv (uint8), as PyTorch coalesces work. */
static void coalesced(ncclComm_t comm) {
  enum { AR = 1000, AG = 333, RS = 100, SR = 4097 };
  float* ar = malloc(AR * sizeof(float));
  int32_t *ag_in = malloc(AG * sizeof(int32_t)), *ag_out = malloc((size_t)AG * nranks * sizeof(int32_t));
  double *rs_in = malloc((size_t)RS * nranks * sizeof(double)), *rs_out = malloc(RS * sizeof(double));
  uint8_t *s = malloc(SR), *rv = malloc(SR);
  for (size_t i = 0; i < AR; i++) ar[i] = (float)val(rank, i);
  for (size_t i = 0; i < AG; i++) ag_in[i] = (int32_t)val(rank, i);
  for (size_t i = 0; i < (size_t)RS * nranks; i++) rs_in[i] = val(rank, i) * (rank % 2 ? -1 : 1);
  for (size_t i = 0; i < SR; i++) s[i] = (uint8_t)(rank * 31 + i);
  NOK(ncclGroupStart());
  NOK(ncclAllReduce(ar, ar, AR, ncclFloat32, ncclSum, comm, NULL));
  NOK(ncclAllGather(ag_in, ag_out, AG, ncclInt32, comm, NULL));
  NOK(ncclReduceScatter(rs_in, rs_out, RS, ncclFloat64, ncclMax, comm, NULL));
  NOK(ncclSend(s, SR, ncclUint8, (rank + 1) % nranks, comm, NULL));
  NOK(ncclRecv(rv, SR, ncclUint8, (rank + nranks - 1) % nranks, comm, NULL));
  NOK(ncclGroupEnd());
  for (size_t i = 0; i < AR; i++) {
    double want = 0;
    for (int r = 0; r < nranks; r++) want += val(r, i);
    if (ar[i] != (float)want) NFAIL("allreduce element %zu: %g, want %g", i, ar[i], want);
  }
  for (int r = 0; r < nranks; r++)
    for (size_t i = 0; i < AG; i++)
      if (ag_out[(size_t)r * AG + i] != (int32_t)val(r, i)) NFAIL("allgather rank %d element %zu", r, i);
  for (size_t i = 0; i < RS; i++) {
    size_t k = (size_t)rank * RS + i;
    double want = -INFINITY;
    for (int r = 0; r < nranks; r++) want = fmax(want, val(r, k) * (r % 2 ? -1 : 1));
    if (rs_out[i] != want) NFAIL("reducescatter element %zu: %g, want %g", i, rs_out[i], want);
  }
  int from = (rank + nranks - 1) % nranks;
  for (size_t i = 0; i < SR; i++)
    if (rv[i] != (uint8_t)(from * 31 + i)) NFAIL("recv byte %zu", i);
  free(ar), free(ag_in), free(ag_out), free(rs_in), free(rs_out), free(s), free(rv);
}

/* all_to_all_single as PyTorch issues it: a send and a receive per peer in one group. */
static void alltoall_p2p(ncclComm_t comm) {
  enum { C = 257 };
  int64_t *in = malloc((size_t)C * nranks * sizeof(int64_t)), *out = malloc((size_t)C * nranks * sizeof(int64_t));
  for (size_t i = 0; i < (size_t)C * nranks; i++) in[i] = rank * 100000 + (int64_t)i;
  NOK(ncclGroupStart());
  for (int p = 0; p < nranks; p++) {
    NOK(ncclSend(in + (size_t)p * C, C, ncclInt64, p, comm, NULL));
    NOK(ncclRecv(out + (size_t)p * C, C, ncclInt64, p, comm, NULL));
  }
  NOK(ncclGroupEnd());
  for (int p = 0; p < nranks; p++)
    for (size_t i = 0; i < C; i++)
      if (out[(size_t)p * C + i] != p * 100000 + (int64_t)((size_t)rank * C + i)) NFAIL("alltoall from %d element %zu", p, i);
  free(in), free(out);
}

/* Avg, and a pre-multiplied sum with this rank's scalar rank + 1. */
static void avg_and_premul(ncclComm_t comm) {
  enum { N = 64 };
  float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = (float)(4 * (rank + 1));
  NOK(ncclAllReduce(x, y, N, ncclFloat32, ncclAvg, comm, NULL));
  float want = 2.0f * (float)(nranks + 1);
  for (int i = 0; i < N; i++)
    if (y[i] != want) NFAIL("avg element %d: %g, want %g", i, y[i], want);
  ncclRedOp_t op;
  float scalar = (float)(rank + 1);
  NOK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
  NCHECK((int)op >= (int)ncclNumOps);
  NOK(ncclAllReduce(x, y, N, ncclFloat32, op, comm, NULL));
  want = 0;
  for (int r = 0; r < nranks; r++) want += (float)((r + 1) * 4 * (r + 1));
  for (int i = 0; i < N; i++)
    if (y[i] != want) NFAIL("premulsum element %d: %g, want %g", i, y[i], want);
  NOK(ncclRedOpDestroy(op, comm));
  /* ncclScalarDevice: the scalar is read at every use (host memory on CPU ranks) */
  static float live;
  live = 1.0f;
  NOK(ncclRedOpCreatePreMulSum(&op, &live, ncclFloat32, ncclScalarDevice, comm));
  for (int k = 1; k <= 2; k++) {
    live = (float)k;
    NOK(ncclAllReduce(x, y, N, ncclFloat32, op, comm, NULL));
    want = 0;
    for (int r = 0; r < nranks; r++) want += (float)(k * 4 * (r + 1));
    for (int i = 0; i < N; i++)
      if (y[i] != want) NFAIL("premulsum (device scalar %d) element %d: %g, want %g", k, i, y[i], want);
  }
  NOK(ncclRedOpDestroy(op, comm));
}

/* new_group: ranks split by parity, keyed in reverse; then a split in which rank 0 takes no part. */
static void splits(ncclComm_t comm) {
  ncclComm_t half, rest;
  NOK(ncclCommSplit(comm, rank % 2, -rank, &half, NULL));
  int hn = -1, hr = -1;
  NOK(ncclCommCount(half, &hn));
  NOK(ncclCommUserRank(half, &hr));
  int members = 0, before = 0;
  for (int r = rank % 2; r < nranks; r += 2) members++, before += r > rank;
  NCHECK(hn == members && hr == before); /* key -rank: higher parent ranks first */
  int32_t mine = rank, sum = 0, want = 0;
  NOK(ncclAllReduce(&mine, &sum, 1, ncclInt32, ncclSum, half, NULL));
  for (int r = rank % 2; r < nranks; r += 2) want += r;
  NCHECK(sum == want);
  NOK(ncclCommSplit(comm, rank == 0 ? NCCL_SPLIT_NOCOLOR : 7, 0, &rest, NULL));
  if (rank == 0) {
    NCHECK(rest == NULL);
  } else {
    check_queries(rest, rank - 1, nranks - 1);
    NOK(ncclAllReduce(&mine, &sum, 1, ncclInt32, ncclSum, rest, NULL));
    NCHECK(sum == nranks * (nranks - 1) / 2);
    NOK(ncclCommAbort(rest)); /* PyTorch aborts groups on error or at shutdown */
  }
  NOK(ncclCommFinalize(half));
  NOK(ncclCommDestroy(half));
}

/* Registration round trips, and ncclMemAlloc memory (host memory on CPU ranks) in a collective. */
static void registration(ncclComm_t comm) {
  float* buf = NULL;
  NOK(ncclMemAlloc((void**)&buf, 4096 * sizeof(float)));
  void* h;
  ncclWindow_t w;
  NOK(ncclCommRegister(comm, buf, 4096 * sizeof(float), &h));
  NOK(ncclCommWindowRegister(comm, buf, 4096 * sizeof(float), &w, NCCL_WIN_COLL_SYMMETRIC));
  for (int i = 0; i < 4096; i++) buf[i] = (float)rank;
  NOK(ncclAllReduce(buf, buf, 4096, ncclFloat32, ncclSum, comm, NULL));
  for (int i = 0; i < 4096; i++) NCHECK(buf[i] == (float)(nranks * (nranks - 1) / 2));
  NOK(ncclCommWindowDeregister(comm, w));
  NOK(ncclCommDeregister(comm, h));
  NERR(ncclCommDeregister(comm, h), ncclInvalidArgument, "is not a registration");
  NOK(ncclMemFree(buf));
}

static void seq_pytorch(const char* path) {
  int v = 0;
  NOK(ncclGetVersion(&v));
  NCHECK(v == NCCL_VERSION_CODE && v >= 22700 && v < 22800);
  ncclComm_t comm = init_nonblocking(path);
  check_queries(comm, rank, nranks);
  coalesced(comm);
  alltoall_p2p(comm);
  avg_and_premul(comm);
  splits(comm);
  registration(comm);
  NOK(ncclCommFinalize(comm));
  NOK(ncclCommDestroy(comm));
}

/* ncclCommShrink without the last rank (which takes no part: it may be gone) and
 * ncclCommInitRankScalable with two ids (every rank passes the same ones). */
static void seq_shrink(const char* path) {
  ncclComm_t comm = init_blocking(path);
  int last = nranks - 1;
  if (nranks > 1 && rank != last) {
    ncclComm_t small;
    NOK(ncclCommShrink(comm, &last, 1, &small, NULL, NCCL_SHRINK_DEFAULT));
    check_queries(small, rank, nranks - 1);
    int32_t mine = rank + 1, sum = 0;
    NOK(ncclAllReduce(&mine, &sum, 1, ncclInt32, ncclSum, small, NULL));
    NCHECK(sum == (nranks - 1) * nranks / 2);
    NERR(ncclCommShrink(comm, &rank, 1, &small, NULL, 0), ncclInvalidArgument, "excludes itself");
    NOK(ncclCommDestroy(small));
  }
  NOK(ncclCommDestroy(comm));
  char path2[4200], path3[4200];
  snprintf(path2, sizeof(path2), "%s.a", path);
  snprintf(path3, sizeof(path3), "%s.b", path);
  ncclUniqueId ids[2] = {share_id(rank, path2), share_id(rank, path3)};
  ncclComm_t scal;
  NOK(ncclCommInitRankScalable(&scal, nranks, rank, 2, ids, NULL));
  check_queries(scal, rank, nranks);
  float x = 1.0f, y = 0.0f;
  NOK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, scal, NULL));
  NCHECK(y == (float)nranks);
  NOK(ncclCommDestroy(scal));
  if (rank == 0) unlink(path2), unlink(path3);
}

static void seq_cupy(const char* path) {
  ncclComm_t comm = init_blocking(path);
  check_queries(comm, rank, nranks);
  enum { N = 999 };
  double *a = malloc(N * sizeof(double)), *b = malloc(N * sizeof(double));
  double* g = malloc((size_t)N * nranks * sizeof(double));
  int root = nranks - 1;
  for (size_t i = 0; i < N; i++) a[i] = val(rank, i);
  NOK(ncclBcast(a, N, ncclFloat64, root, comm, NULL));
  for (size_t i = 0; i < N; i++) NCHECK(a[i] == val(root, i));
  for (size_t i = 0; i < N; i++) a[i] = val(rank, i);
  NOK(ncclBroadcast(a, b, N, ncclFloat64, 0, comm, NULL));
  for (size_t i = 0; i < N; i++) NCHECK(b[i] == val(0, i));
  NOK(ncclReduce(a, b, N, ncclFloat64, ncclProd, root, comm, NULL));
  for (size_t i = 0; rank == root && i < N; i++) {
    double want = 1;
    for (int r = 0; r < nranks; r++) want *= val(r, i);
    NCHECK(b[i] == want);
  }
  NOK(ncclGather(a, g, N, ncclFloat64, 1 % nranks, comm, NULL));
  for (int r = 0; rank == 1 % nranks && r < nranks; r++)
    for (size_t i = 0; i < N; i++) NCHECK(g[(size_t)r * N + i] == val(r, i));
  for (size_t i = 0; i < (size_t)N * nranks; i++) g[i] = (double)i + 0.5;
  NOK(ncclScatter(g, b, N, ncclFloat64, 0, comm, NULL));
  for (size_t i = 0; i < N; i++) NCHECK(b[i] == (double)((size_t)rank * N + i) + 0.5);
  free(a), free(b), free(g);
  NOK(ncclCommDestroy(comm));
}

/* vLLM's PyNcclCommunicator: blocking init, each collective on its own (no groups), a send/recv
 * pair between two ranks outside a group, windows registered around the buffers it reuses. */
static void seq_vllm(const char* path) {
  const char* e = ncclGetErrorString(ncclInvalidArgument);
  NCHECK(e != NULL && *e);
  int v = 0;
  NOK(ncclGetVersion(&v));
  ncclComm_t comm = init_blocking(path);
  enum { N = 512 };
  float *a = malloc(N * sizeof(float)), *b = malloc((size_t)N * nranks * sizeof(float));
  ncclWindow_t wa, wb;
  NOK(ncclCommWindowRegister(comm, a, N * sizeof(float), &wa, NCCL_WIN_COLL_SYMMETRIC));
  NOK(ncclCommWindowRegister(comm, b, (size_t)N * nranks * sizeof(float), &wb, NCCL_WIN_COLL_SYMMETRIC));
  for (int i = 0; i < N; i++) a[i] = (float)val(rank, (size_t)i);
  NOK(ncclAllReduce(a, a, N, ncclFloat32, ncclSum, comm, NULL));
  for (int i = 0; i < N; i++) {
    double want = 0;
    for (int r = 0; r < nranks; r++) want += val(r, (size_t)i);
    NCHECK(a[i] == (float)want);
  }
  for (int i = 0; i < N; i++) a[i] = (float)val(rank, (size_t)i);
  NOK(ncclAllGather(a, b, N, ncclFloat32, comm, NULL));
  for (int r = 0; r < nranks; r++) NCHECK(b[(size_t)r * N + 5] == (float)val(r, 5));
  NOK(ncclReduceScatter(b, a, N / nranks, ncclFloat32, ncclMin, comm, NULL));
  NOK(ncclReduce(a, b, N, ncclFloat32, ncclMax, 0, comm, NULL));
  NOK(ncclBroadcast(a, a, N, ncclFloat32, 0, comm, NULL));
  if (nranks >= 2 && rank < 2) { /* a pipeline stage hand-off */
    for (int i = 0; i < N; i++) a[i] = (float)(rank * 10 + i);
    if (rank == 0) NOK(ncclSend(a, N, ncclFloat32, 1, comm, NULL));
    else NOK(ncclRecv(a, N, ncclFloat32, 0, comm, NULL));
    for (int i = 0; rank == 1 && i < N; i++) NCHECK(a[i] == (float)i);
  }
  NOK(ncclCommWindowDeregister(comm, wb));
  NOK(ncclCommWindowDeregister(comm, wa));
  free(a), free(b);
  NOK(ncclCommDestroy(comm));
}

static void seq_errors(const char* path) {
  ncclComm_t comm = init_blocking(path);
  float x[16] = {0};
  ncclComm_t fake = (ncclComm_t)(uintptr_t)0x1234;
  NERR(ncclAllReduce(x, x, 16, ncclFloat32, ncclSum, fake, NULL), ncclInvalidArgument, "is not a communicator");
  NERR(ncclAllReduce(x, x, 16, ncclFloat32, ncclSum, NULL, NULL), ncclInvalidArgument, "is not a communicator");
  NERR(ncclAllReduce(x, x, 16, (ncclDataType_t)99, ncclSum, comm, NULL), ncclInvalidArgument, "99");
  NERR(ncclAllReduce(x, x, 16, ncclFloat32, (ncclRedOp_t)77, comm, NULL), ncclInvalidArgument, "77");
  NERR(ncclAllReduce(x, x, SIZE_MAX / 2, ncclFloat32, ncclSum, comm, NULL), ncclInvalidArgument, "ncclAllReduce");
  NERR(ncclBroadcast(x, x, 16, ncclFloat32, nranks, comm, NULL), ncclInvalidArgument, "root");
  NERR(ncclSend(x, 16, ncclFloat32, -1, comm, NULL), ncclInvalidArgument, "peer");
  NERR(ncclCommCount(comm, NULL), ncclInvalidArgument, "count is NULL");
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0x1234;
  ncclComm_t other;
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  NERR(ncclCommInitRankConfig(&other, nranks, id, rank, &bad), ncclInvalidArgument, "magic");
  NERR(ncclCommInitRank(&other, nranks, id, nranks), ncclInvalidArgument, "rank");
  NERR(ncclGroupEnd(), ncclInvalidUsage, "without ncclGroupStart");
  NERR(ncclDevCommCreate(comm, NULL, NULL), ncclInvalidUsage, "device API");
  /* the detail is the communicator's too */
  NCHECK(strstr(ncclGetLastError(comm), "device API") != NULL);
  NOK(ncclAllReduce(x, x, 16, ncclFloat32, ncclSum, comm, NULL)); /* still usable after the refusals */
  if (nranks > 1) /* counts that differ between ranks: an error on every rank, not a hang */
    NERR(ncclAllReduce(x, x, rank == 0 ? 8 : 16, ncclFloat32, ncclSum, comm, NULL), ncclInvalidUsage,
         "count or datatype differ");
  NOK(ncclCommDestroy(comm));
  NERR(ncclAllReduce(x, x, 16, ncclFloat32, ncclSum, comm, NULL), ncclInvalidArgument, "destroyed");
  NERR(ncclCommDestroy(comm), ncclInvalidArgument, "not a communicator");
}

int main(int argc, char** argv) {
  if (argc != 3) NFAIL("usage: nccl_seq pytorch|cupy|errors|vllm|shrink IDFILE (under mscclpp-run)");
  rank = env_int("MSCCLPP_RANK", -1), nranks = env_int("MSCCLPP_WORLD_SIZE", -1);
  NCHECK(rank >= 0 && nranks >= 1);
  char path[4096];
  snprintf(path, sizeof(path), "%s.%s", argv[2], getenv("MSCCLPP_MASTER_PORT") ? getenv("MSCCLPP_MASTER_PORT") : "0");
  if (!strcmp(argv[1], "pytorch")) seq_pytorch(path);
  else if (!strcmp(argv[1], "cupy")) seq_cupy(path);
  else if (!strcmp(argv[1], "errors")) seq_errors(path);
  else if (!strcmp(argv[1], "vllm")) seq_vllm(path);
  else if (!strcmp(argv[1], "shrink")) seq_shrink(path);
  else NFAIL("unknown sequence %s", argv[1]);
  if (rank == 0) unlink(path);
  printf("rank %d: %s sequence OK\n", rank, argv[1]);
  return 0;
}
