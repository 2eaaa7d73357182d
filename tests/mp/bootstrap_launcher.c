/* bootstrap_launcher.c - mscclppCommInitFromEnv as a launcher starts it: init, an allgather of the
 * ranks, a barrier. Run under mscclpp-run by ctest, and under a real torchrun (whose agent holds
 * MASTER_PORT with its store) by python/tests/test_torchrun_launch.py.
 *
 *   bootstrap_launcher            every rank prints "rank R of N: ok" and exits 0
 *   bootstrap_launcher fail-root  rank 0 cannot start its root (MSCCLPP_SOCKET_IFNAME names no
 *                                 interface): every rank prints "rank R: init failed after S s: why"
 *                                 and exits 3; rank 0 stays up a few seconds first, since
 *                                 torchrun stops every other rank once one has exited */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mscclpp/mscclpp.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* This process's rank as its launcher says (before the library reads it). */
static int launcher_rank(void) {
  const char* names[] = {"MSCCLPP_RANK", "RANK"};
  for (int i = 0; i < 2; i++)
    if (getenv(names[i])) return atoi(getenv(names[i]));
  return -1;
}

int main(int argc, char** argv) {
  int fail_root = argc > 1 && strcmp(argv[1], "fail-root") == 0;
  int me = launcher_rank();
  if (fail_root && me == 0) setenv("MSCCLPP_SOCKET_IFNAME", "=no-such-interface0", 1);
  double t0 = now_s();
  mscclppComm_t comm = NULL;
  mscclppResult_t r = mscclppCommInitFromEnv(&comm, NULL);
  if (r != mscclppSuccess) {
    printf("rank %d: init failed after %.2f s: %s\n", me, now_s() - t0, mscclppGetLastError());
    fflush(stdout); /* a SIGTERM from the launcher would drop a buffered line */
    if (fail_root && me == 0) sleep(5);
    return 3;
  }
  int rank = -1, n = 0;
  if (mscclppCommRank(comm, &rank) != mscclppSuccess || mscclppCommSize(comm, &n) != mscclppSuccess || n > 1024) return 1;
  int ranks[1024] = {0};
  ranks[rank] = rank + 1;
  if (mscclppBootstrapAllGather(comm, ranks, sizeof(int)) != mscclppSuccess) return 1;
  for (int i = 0; i < n; i++)
    if (ranks[i] != i + 1) {
      printf("rank %d: slot %d holds %d\n", rank, i, ranks[i]);
      return 1;
    }
  if (mscclppBootstrapBarrier(comm) != mscclppSuccess || mscclppCommDestroy(comm) != mscclppSuccess) return 1;
  printf("rank %d of %d: ok (%.2f s)\n", rank, n, now_s() - t0);
  return 0;
}
