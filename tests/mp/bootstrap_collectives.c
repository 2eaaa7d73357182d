/* bootstrap_collectives.c - bootstrap allgather, barrier and tagged send/recv through the public
 * API, with random sizes (0 bytes to 1 MiB), random tags and peers, several messages per (peer,
 * tag) in flight (FIFO order checked) and messages sent long before their recv is posted.
 *
 *   bootstrap_collectives MODE [ITERATIONS]
 *
 * MODE says how the communicator is created: ipport (mscclppCommInitRank with the root's
 * "host:port"), uid (rank 0's mscclppGetUniqueId, shared through a file), env (InitFromEnv with
 * mscclpp-run's variables), or torchrun | ompi | pmi | slurm: the program re-executes itself with
 * that launcher's variables instead of MSCCLPP_RANK/WORLD_SIZE and uses InitFromEnv. */
#include "bootstrap_mp.h"

#define BIG (1u << 20)

static int rank, nranks;

/* Byte i of the message (src, iter, idx). */
static uint8_t pattern(int src, int iter, int idx, size_t i) {
  return (uint8_t)(src * 131 + iter * 31 + idx * 7 + (int)(i % 251));
}

/* A random size: often small, sometimes 0, now and then up to 1 MiB. */
static size_t rand_size(uint64_t* st) {
  uint64_t r = mp_rand(st);
  if (r % 7 == 0) return 0;
  if (r % 5 == 0) return (size_t)(mp_rand(st) % (BIG + 1));
  return (size_t)(mp_rand(st) % 5000);
}

static void test_allgather(mscclppComm_t comm, int iters) {
  uint8_t* buf = malloc((size_t)nranks * BIG + 1);
  CHECK(buf);
  for (int it = 0; it < iters; it++) {
    uint64_t st = 1000 + (uint64_t)it; /* same on every rank */
    size_t size = rand_size(&st);
    memset(buf, 0xee, (size_t)nranks * size);
    for (size_t i = 0; i < size; i++) buf[(size_t)rank * size + i] = pattern(rank, it, 0, i);
    CHECK_OK(mscclppBootstrapAllGather(comm, buf, (int)size));
    for (int r = 0; r < nranks; r++)
      for (size_t i = 0; i < size; i++)
        CHECK_MSG(buf[(size_t)r * size + i] == pattern(r, it, 0, i), "allgather iter %d size %zu: slot %d byte %zu", it,
                  size, r, i);
    if (it % 4 == 0) CHECK_OK(mscclppBootstrapBarrier(comm));
  }
  free(buf);
}

/* One p2p round: every rank sends an "early" message and a batch of one tag to rank+k, then
 * receives the batch from rank-k in order and the early message last. */
static void p2p_round(mscclppComm_t comm, int it, uint8_t* buf) {
  uint64_t st = 777777 + (uint64_t)it;
  int k = 1 + (int)(mp_rand(&st) % (uint64_t)(nranks - 1));
  int nmsgs = 1 + (int)(mp_rand(&st) % 4), tag = (int)(mp_rand(&st) % 3);
  int to = (rank + k) % nranks, from = (rank - k + nranks) % nranks;
  size_t sizes[4];
  for (int j = 0; j < nmsgs; j++) sizes[j] = rand_size(&st);
  int early = it + 1000;
  CHECK_OK(mscclppBootstrapSend(comm, to, early, &it, sizeof(it)));
  for (int j = 0; j < nmsgs; j++) {
    for (size_t i = 0; i < sizes[j]; i++) buf[i] = pattern(rank, it, j, i);
    CHECK_OK(mscclppBootstrapSend(comm, to, tag, buf, sizes[j]));
  }
  for (int j = 0; j < nmsgs; j++) {
    memset(buf, 0, sizes[j]);
    CHECK_OK(mscclppBootstrapRecv(comm, from, tag, buf, sizes[j]));
    for (size_t i = 0; i < sizes[j]; i++)
      CHECK_MSG(buf[i] == pattern(from, it, j, i), "p2p iter %d msg %d (%zu bytes) from %d: byte %zu", it, j, sizes[j],
                from, i);
  }
  int got = -1;
  CHECK_OK(mscclppBootstrapRecv(comm, from, early, &got, sizeof(got)));
  CHECK(got == it);
}

static void test_p2p(mscclppComm_t comm, int iters) {
  if (nranks < 2) return;
  uint8_t* buf = malloc(BIG + 1);
  CHECK(buf);
  for (int it = 0; it < iters; it++) {
    p2p_round(comm, it, buf);
    if (it % 8 == 7) CHECK_OK(mscclppBootstrapBarrier(comm));
  }
  free(buf);
}

/* Rewrites mscclpp-run's variables into a launcher's and runs this program again. */
static void reexec_as(const char* launcher, char** argv) {
  char r[16], n[16], port[16];
  snprintf(r, sizeof(r), "%d", mp_env_int("MSCCLPP_RANK"));
  snprintf(n, sizeof(n), "%d", mp_env_int("MSCCLPP_WORLD_SIZE"));
  snprintf(port, sizeof(port), "%d", mp_env_int("MSCCLPP_MASTER_PORT"));
  const char* host = getenv("MSCCLPP_MASTER_ADDR");
  const char* kv[12] = {0};
  if (strcmp(launcher, "torchrun") == 0) { /* the root only through MASTER_ADDR/MASTER_PORT */
    const char* t[] = {"RANK", r, "WORLD_SIZE", n, "LOCAL_RANK", r, "MASTER_ADDR", host, "MASTER_PORT", port};
    memcpy(kv, t, sizeof(t));
    unsetenv("MSCCLPP_MASTER_ADDR");
    unsetenv("MSCCLPP_MASTER_PORT");
  } else if (strcmp(launcher, "ompi") == 0) { /* MSCCLPP_MASTER_ADDR/PORT stay */
    const char* t[] = {"OMPI_COMM_WORLD_RANK", r, "OMPI_COMM_WORLD_SIZE", n, "OMPI_COMM_WORLD_LOCAL_RANK", r};
    memcpy(kv, t, sizeof(t));
  } else if (strcmp(launcher, "pmi") == 0) { /* MASTER_ADDR with MSCCLPP_MASTER_PORT */
    const char* t[] = {"PMI_RANK", r, "PMI_SIZE", n, "MPI_LOCALRANKID", r, "MASTER_ADDR", host};
    memcpy(kv, t, sizeof(t));
    unsetenv("MSCCLPP_MASTER_ADDR");
  } else if (strcmp(launcher, "slurm") == 0) { /* MSCCLPP_MASTER_ADDR with MASTER_PORT */
    const char* t[] = {"SLURM_PROCID", r, "SLURM_NTASKS", n, "SLURM_LOCALID", r, "MASTER_PORT", port};
    memcpy(kv, t, sizeof(t));
    unsetenv("MSCCLPP_MASTER_PORT");
  } else {
    TEST_FAIL("unknown mode %s", launcher);
  }
  for (int i = 0; i < 12 && kv[i]; i += 2) setenv(kv[i], kv[i + 1], 1);
  unsetenv("MSCCLPP_RANK");
  unsetenv("MSCCLPP_WORLD_SIZE");
  unsetenv("MSCCLPP_LOCAL_RANK");
  setenv("MPP_TEST_REEXEC", launcher, 1);
  execv("/proc/self/exe", argv);
  TEST_FAIL("re-exec: %s", strerror(errno));
}

static const char* launcher_rank_var(const char* launcher) {
  if (strcmp(launcher, "torchrun") == 0) return "RANK";
  if (strcmp(launcher, "ompi") == 0) return "OMPI_COMM_WORLD_RANK";
  if (strcmp(launcher, "pmi") == 0) return "PMI_RANK";
  return "SLURM_PROCID";
}

static mscclppComm_t create(const char* mode, char** argv) {
  mscclppComm_t comm = NULL;
  const char* launched = getenv("MPP_TEST_REEXEC");
  if (launched) {
    rank = -1;
    CHECK_OK(mscclppCommInitFromEnv(&comm, NULL));
    CHECK_OK(mscclppCommRank(comm, &rank));
    CHECK_OK(mscclppCommSize(comm, &nranks));
    return comm;
  }
  rank = mp_env_int("MSCCLPP_RANK");
  nranks = mp_env_int("MSCCLPP_WORLD_SIZE");
  if (strcmp(mode, "ipport") == 0) {
    char root[300];
    mp_root(root, sizeof(root));
    CHECK_OK(mscclppCommInitRank(&comm, nranks, root, rank));
  } else if (strcmp(mode, "uid") == 0) {
    mscclppUniqueId id;
    mp_share_id(rank, &id);
    CHECK_OK(mscclppCommInitRankFromId(&comm, nranks, id, rank));
    mp_unshare_id(rank);
  } else if (strcmp(mode, "env") == 0) {
    CHECK_OK(mscclppCommInitFromEnv(&comm, NULL));
  } else {
    reexec_as(mode, argv);
  }
  return comm;
}

int main(int argc, char** argv) {
  CHECK_MSG(argc >= 2, "usage: %s ipport|uid|env|torchrun|ompi|pmi|slurm [ITERATIONS]", argv[0]);
  int iters = argc > 2 ? atoi(argv[2]) : 60;
  mscclppComm_t comm = create(argv[1], argv);
  int r = -1, n = -1;
  CHECK_OK(mscclppCommRank(comm, &r));
  CHECK_OK(mscclppCommSize(comm, &n));
  CHECK(r == rank && n == nranks);
  const char* launched = getenv("MPP_TEST_REEXEC");
  if (launched) CHECK_MSG(r == atoi(getenv(launcher_rank_var(launched))), "rank %d is not the launcher's", r);
  double t0 = mp_now();
  CHECK_OK(mscclppBootstrapBarrier(comm));
  test_allgather(comm, iters);
  test_p2p(comm, iters);
  CHECK_OK(mscclppBootstrapBarrier(comm));
  CHECK_OK(mscclppCommDestroy(comm));
  if (rank == 0) printf("bootstrap_collectives %s: %d ranks, %d iterations, %.2f s\n", argv[1], nranks, iters, mp_now() - t0);
  return 0;
}
