/* bootstrap_bench.c - what the bootstrap's collectives cost: mean time of a barrier, a 64-byte and
 * a 1 MiB-per-rank allgather, and a 1 KiB send/recv round trip between ranks 0 and 1, printed by
 * rank 0 (used to measure the cost of sealing, docs/security.md). Every allgather's result is
 * checked. Argument: iterations of the small operations (the large allgather runs a tenth). */
#include "bootstrap_mp.h"

static double bench_allgather(mscclppComm_t comm, int rank, int nranks, size_t bpr, int iters) {
  uint8_t* buf = malloc(bpr * (size_t)nranks);
  CHECK(buf);
  double t0 = mp_now();
  for (int it = 0; it < iters; it++) {
    memset(buf + bpr * (size_t)rank, (rank * 7 + it) & 0xff, bpr);
    CHECK_OK(mscclppBootstrapAllGather(comm, buf, (int)bpr));
    for (int r = 0; r < nranks; r++)
      CHECK_MSG(buf[bpr * (size_t)r] == ((r * 7 + it) & 0xff) && buf[bpr * (size_t)r + bpr - 1] == ((r * 7 + it) & 0xff),
                "allgather %d: rank %d's slot is wrong", it, r);
  }
  free(buf);
  return (mp_now() - t0) / iters;
}

int main(int argc, char** argv) {
  int rank = mp_env_int("MSCCLPP_RANK"), nranks = mp_env_int("MSCCLPP_WORLD_SIZE");
  int iters = argc > 1 ? atoi(argv[1]) : 200;
  char root[300];
  mp_root(root, sizeof(root));
  mscclppComm_t comm;
  CHECK_OK(mscclppCommInitRank(&comm, nranks, root, rank));
  CHECK_OK(mscclppBootstrapBarrier(comm));
  double t0 = mp_now();
  for (int it = 0; it < iters; it++) CHECK_OK(mscclppBootstrapBarrier(comm));
  double barrier = (mp_now() - t0) / iters;
  double small = bench_allgather(comm, rank, nranks, 64, iters);
  double large = bench_allgather(comm, rank, nranks, 1 << 20, iters / 10 ? iters / 10 : 1);
  uint8_t msg[1024] = {0};
  t0 = mp_now();
  for (int it = 0; it < iters && nranks > 1; it++) {
    if (rank == 0) {
      msg[0] = (uint8_t)it;
      CHECK_OK(mscclppBootstrapSend(comm, 1, it, msg, sizeof(msg)));
      CHECK_OK(mscclppBootstrapRecv(comm, 1, it, msg, sizeof(msg)));
      CHECK(msg[0] == (uint8_t)(it + 1));
    } else if (rank == 1) {
      CHECK_OK(mscclppBootstrapRecv(comm, 0, it, msg, sizeof(msg)));
      msg[0]++;
      CHECK_OK(mscclppBootstrapSend(comm, 0, it, msg, sizeof(msg)));
    }
  }
  double pingpong = (mp_now() - t0) / iters;
  CHECK_OK(mscclppBootstrapBarrier(comm));
  if (rank == 0)
    printf("bootstrap_bench n=%d: barrier %.1f us, allgather 64 B %.1f us, allgather 1 MiB/rank %.2f ms, "
           "send/recv 1 KiB round trip %.1f us\n",
           nranks, barrier * 1e6, small * 1e6, large * 1e3, pingpong * 1e6);
  CHECK_OK(mscclppCommDestroy(comm));
  return 0;
}
