/* bootstrap_fdlimit.c - running out of file descriptors is an error that says so, promptly and
 * without spinning (issue 22, item 8).
 *
 *   bootstrap_fdlimit LIMIT   every rank lowers RLIMIT_NOFILE to LIMIT (setrlimit), then inits
 *                             (bootstrap timeout 60 s) and connects over tcp to every other rank.
 *
 * Some rank runs out of fds. Every rank must fail (no success, no hang) within 10 s of starting,
 * with an error that says "ulimit -n": its own shortage, the rank that failed for lack of fds (the
 * FAILED notice carries the cause), or the bootstrap root in rank 0's process that ran out of fds
 * (its failure reply carries the cause, also to ranks that connect after the failure). No rank
 * burns CPU meanwhile (its CPU time stays under half the wall time plus 0.5 s: the root used to
 * spin at 100% on a failing accept()). */
#include <sys/resource.h>

#include "bootstrap_mp.h"

#define PROMPT_S 10.0

static int rank, nranks;

static char err_text[1024];

/* The error of the first failing step (init, then tcp connections to every peer), or Success;
 * its text in err_text. */
static mscclppResult_t run(const char* root) {
  mscclppComm_t comm;
  mscclppResult_t r = mscclppCommInitRank(&comm, nranks, root, rank);
  snprintf(err_text, sizeof(err_text), "%s", mscclppGetLastError());
  if (r != mscclppSuccess) return r;
  mscclppConnection_t conns[64];
  for (int k = 1; k < nranks && r == mscclppSuccess; k++) {
    int to = (rank + k) % nranks, from = (rank - k + nranks) % nranks;
    /* pairs in an order every rank agrees on: connect to rank+k and rank-k in rank order */
    int a = to < from ? to : from, b = to < from ? from : to;
    r = mscclppConnectionCreate(comm, a, k, mscclppTransportTCP, &conns[2 * k]);
    if (r == mscclppSuccess && a != b) r = mscclppConnectionCreate(comm, b, k, mscclppTransportTCP, &conns[2 * k + 1]);
  }
  if (r == mscclppSuccess) r = mscclppBootstrapBarrier(comm);
  snprintf(err_text, sizeof(err_text), "%s", mscclppGetLastError());
  mscclppCommAbort(comm);
  return r;
}

static double cpu_s(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + (double)u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

int main(int argc, char** argv) {
  CHECK_MSG(argc == 2, "usage: %s LIMIT", argv[0]);
  rank = mp_env_int("MSCCLPP_RANK");
  nranks = mp_env_int("MSCCLPP_WORLD_SIZE");
  CHECK_MSG(nranks <= 32, "at most 32 ranks");
  char root[300];
  mp_root(root, sizeof(root));
  CHECK_OK(mscclppSetBootstrapConnTimeout(60));
  struct rlimit rl;
  CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
  rl.rlim_cur = (rlim_t)atoi(argv[1]);
  CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
  double t0 = mp_now(), c0 = cpu_s();
  mscclppResult_t r = run(root);
  double dt = mp_now() - t0, cpu = cpu_s() - c0;
  const char* e = err_text;
  fprintf(stderr, "rank %d: %.2f s: %s\n", rank, dt, e);
  CHECK_MSG(r != mscclppSuccess, "rank %d: everything succeeded with %s fds: raise nothing?", rank, argv[1]);
  CHECK_MSG(dt < PROMPT_S, "rank %d: failing took %.1f s: %s", rank, dt, e);
  CHECK_MSG(cpu < dt / 2 + 0.5, "rank %d: %.2f s of CPU in %.2f s: spinning?", rank, cpu, dt);
  CHECK_MSG(strstr(e, "ulimit -n") != NULL, "rank %d: the error does not say ulimit -n: %s", rank, e);
  /* Rank 0's root tells late ranks why for a while, while its process lives: rank 0 stays until
   * every other rank has finished (each leaves a file: no fds needed to look), PROMPT_S at most. */
  char path[128];
  snprintf(path, sizeof(path), "/tmp/mscclpp-fdlimit-%d-%d-%d", (int)getuid(), mp_env_int("MSCCLPP_MASTER_PORT"), rank);
  if (rank != 0) {
    FILE* f = fopen(path, "w");
    CHECK_MSG(f && fclose(f) == 0, "rank %d: cannot create %s", rank, path);
  }
  if (rank == 0) {
    for (int k = 1; k < nranks; k++) {
      snprintf(path, sizeof(path), "/tmp/mscclpp-fdlimit-%d-%d-%d", (int)getuid(), mp_env_int("MSCCLPP_MASTER_PORT"), k);
      while (access(path, F_OK) != 0 && mp_now() - t0 < PROMPT_S + 2) usleep(20000);
      unlink(path);
    }
    printf("bootstrap_fdlimit %s: every rank failed within %.1f s, CPU %.2f s; rank 0: %s\n", argv[1], dt, cpu, e);
  }
  return 0;
}
