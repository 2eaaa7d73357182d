/* nccl_threads.c - several ranks in one process, as TVM Disco (a rank per worker thread) and
 * nccl-tests -g N (one thread initialises every rank inside a group) make them, on CPU ranks:
 *
 *   nccl_threads initall N    ncclCommInitAll, then a thread per rank runs collectives and a split
 *   nccl_threads group N      ncclCommInitRank for every rank inside one group on this thread,
 *                             then the same
 *   nccl_threads disco N      as TVM Disco: a worker thread per rank initialises its own
 *                             communicator with ncclCommInitRank (all at once, no group), then
 *                             every reduce op (avg included), allgather, broadcast
 *   nccl_threads onethread N  as nccl-tests -g N: the inits in one group, then every rank's
 *                             collectives in one group on this one thread (queued, then each
 *                             rank's run on a thread of its own at ncclGroupEnd) */
#include <pthread.h>

#include "nccl/nccl_common.h"

static int nranks;

struct worker {
  ncclComm_t comm;
  int rank;
  int ok;
};

/* An allreduce of every datatype's sum, a TVM-style send/recv ring in a group, a split. */
static void* work(void* arg) {
  struct worker* w = arg;
  int r = -1, n = -1;
  NOK(ncclCommUserRank(w->comm, &r));
  NOK(ncclCommCount(w->comm, &n));
  NCHECK(r == w->rank && n == nranks);
  enum { N = 100 };
  double x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = val(r, (size_t)i);
  NOK(ncclAllReduce(x, y, N, ncclFloat64, ncclSum, w->comm, NULL));
  for (int i = 0; i < N; i++) {
    double want = 0;
    for (int k = 0; k < nranks; k++) want += val(k, (size_t)i);
    NCHECK(y[i] == want);
  }
  NOK(ncclGroupStart());
  NOK(ncclSend(x, N, ncclFloat64, (r + 1) % n, w->comm, NULL));
  NOK(ncclRecv(y, N, ncclFloat64, (r + n - 1) % n, w->comm, NULL));
  NOK(ncclGroupEnd());
  for (int i = 0; i < N; i++) NCHECK(y[i] == val((r + n - 1) % n, (size_t)i));
  ncclComm_t half;
  NOK(ncclCommSplit(w->comm, r % 2, r, &half, NULL));
  int hr = -1;
  NOK(ncclCommUserRank(half, &hr));
  NCHECK(hr == r / 2);
  NOK(ncclCommDestroy(half));
  w->ok = 1;
  return NULL;
}

static void run_workers(ncclComm_t* comms) {
  pthread_t th[64];
  struct worker w[64];
  for (int i = 0; i < nranks; i++) {
    w[i] = (struct worker){comms[i], i, 0};
    NCHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0);
  }
  for (int i = 0; i < nranks; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < nranks; i++) NCHECK(w[i].ok);
  for (int i = 0; i < nranks; i++) NOK(ncclCommDestroy(comms[i]));
}

/* Every rank's allreduce and allgather from this thread, in one group per collective. */
static void one_thread(ncclComm_t* comms) {
  enum { N = 300 };
  static float x[64][N], y[64][N], g[64][N * 64];
  for (int r = 0; r < nranks; r++)
    for (int i = 0; i < N; i++) x[r][i] = (float)val(r, (size_t)i);
  /* nccl-tests -R 2: every rank's symmetric windows registered in one group (collective: they
   * wait for ncclGroupEnd, or the first rank's would wait for the others forever) */
  ncclWindow_t wx[64], wy[64];
  NOK(ncclGroupStart());
  for (int r = 0; r < nranks; r++) {
    NOK(ncclCommWindowRegister(comms[r], x[r], sizeof(x[r]), &wx[r], NCCL_WIN_COLL_SYMMETRIC));
    NOK(ncclCommWindowRegister(comms[r], y[r], sizeof(y[r]), &wy[r], NCCL_WIN_COLL_SYMMETRIC));
  }
  NOK(ncclGroupEnd());
  NOK(ncclGroupStart());
  for (int r = 0; r < nranks; r++) NOK(ncclAllReduce(x[r], y[r], N, ncclFloat32, ncclSum, comms[r], NULL));
  NOK(ncclGroupEnd());
  NOK(ncclGroupStart());
  for (int r = 0; r < nranks; r++) NOK(ncclAllGather(x[r], g[r], N, ncclFloat32, comms[r], NULL));
  NOK(ncclGroupEnd());
  for (int r = 0; r < nranks; r++)
    for (int i = 0; i < N; i++) {
      double want = 0;
      for (int k = 0; k < nranks; k++) want += val(k, (size_t)i);
      NCHECK(y[r][i] == (float)want);
      for (int k = 0; k < nranks; k++) NCHECK(g[r][k * N + i] == (float)val(k, (size_t)i));
    }
  for (int r = 0; r < nranks; r++) NOK(ncclCommWindowDeregister(comms[r], wx[r]));
  for (int r = 0; r < nranks; r++) NOK(ncclCommWindowDeregister(comms[r], wy[r]));
}

struct disco {
  ncclUniqueId id;
  int rank;
  ncclComm_t comm;
};

/* One TVM Disco worker: its own init, then allreduce with every operator, allgather, broadcast. */
static void* disco_worker(void* arg) {
  struct disco* d = arg;
  NOK(ncclCommInitRank(&d->comm, nranks, d->id, d->rank));
  static const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMin, ncclMax, ncclAvg};
  for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
    float x[32], y[32];
    for (int i = 0; i < 32; i++) x[i] = (float)(2 * (d->rank + 1));
    NOK(ncclAllReduce(x, y, 32, ncclFloat32, ops[k], d->comm, NULL));
    float want = ops[k] == ncclProd ? 1.0f : 0.0f;
    for (int r = 0; r < nranks; r++) {
      float v = (float)(2 * (r + 1));
      if (ops[k] == ncclSum || ops[k] == ncclAvg) want += v;
      else if (ops[k] == ncclProd) want *= v;
      else if (ops[k] == ncclMin) want = r == 0 ? v : (v < want ? v : want);
      else want = r == 0 ? v : (v > want ? v : want);
    }
    if (ops[k] == ncclAvg) want /= (float)nranks;
    for (int i = 0; i < 32; i++) NCHECK(y[i] == want);
  }
  int32_t mine = d->rank * 7, all[64], b = d->rank == 0 ? 99 : -1;
  NOK(ncclAllGather(&mine, all, 1, ncclInt32, d->comm, NULL));
  for (int r = 0; r < nranks; r++) NCHECK(all[r] == r * 7);
  NOK(ncclBroadcast(&b, &b, 1, ncclInt32, 0, d->comm, NULL));
  NCHECK(b == 99);
  return NULL;
}

static void disco(ncclComm_t* comms) {
  pthread_t th[64];
  struct disco d[64];
  ncclUniqueId id;
  NOK(ncclGetUniqueId(&id));
  for (int i = 0; i < nranks; i++) {
    d[i] = (struct disco){id, i, NULL};
    NCHECK(pthread_create(&th[i], NULL, disco_worker, &d[i]) == 0);
  }
  for (int i = 0; i < nranks; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < nranks; i++) comms[i] = d[i].comm;
}

int main(int argc, char** argv) {
  if (argc != 3) NFAIL("usage: nccl_threads initall|group|onethread|disco N");
  nranks = atoi(argv[2]);
  NCHECK(nranks >= 1 && nranks <= 64);
  ncclComm_t comms[64];
  if (!strcmp(argv[1], "disco")) {
    disco(comms);
  } else if (!strcmp(argv[1], "initall")) {
    NOK(ncclCommInitAll(comms, nranks, NULL));
  } else if (!strcmp(argv[1], "group") || !strcmp(argv[1], "onethread")) {
    ncclUniqueId id;
    NOK(ncclGetUniqueId(&id));
    NOK(ncclGroupStart());
    for (int i = 0; i < nranks; i++) NOK(ncclCommInitRank(&comms[i], nranks, id, i));
    int c = 0;
    NERR(ncclCommCount(comms[0], &c), ncclInvalidUsage, "waits for the ncclGroupEnd");
    NOK(ncclGroupEnd());
  } else {
    NFAIL("unknown mode %s", argv[1]);
  }
  if (!strcmp(argv[1], "onethread")) one_thread(comms);
  run_workers(comms);
  printf("nccl_threads %s: %d ranks in one process OK\n", argv[1], nranks);
  return 0;
}
