/* nccl_fallback.c - calls forced to a real NCCL (MSCCLPP_NCCL_FALLBACK=allreduce), with
 * tests/nccl/fake_nccl.c standing in for it (MSCCLPP_NCCL_LIB_PATH), on CPU ranks:
 *
 *   nccl_fallback forward IDFILE   allreduce goes to the fake (its marks, one id on every rank,
 *                                  one twin per communicator), allgather stays native, also mixed
 *                                  in one group; the twin is destroyed with the communicator
 *   nccl_fallback missing IDFILE   MSCCLPP_NCCL_LIB_PATH unset: the forced call fails saying why
 *   nccl_fallback self IDFILE      MSCCLPP_NCCL_LIB_PATH naming this library: refused, not a loop
 *   nccl_fallback preloaded IDFILE as forward, with the fake loaded into the global scope first (as
 *                                  torch preloads its NCCL): its own calls bind to this library's
 *                                  names and must be sent back to it
 *
 * under mscclpp-run -n N. */
#include <dlfcn.h>

#include "nccl/nccl_common.h"

static int rank, nranks;

static int fake_calls(int what) {
  void* h = dlopen(getenv("MSCCLPP_NCCL_LIB_PATH"), RTLD_NOW | RTLD_NOLOAD);
  NCHECK(h != NULL);
  int (*f)(int) = (int (*)(int))dlsym(h, "fake_nccl_calls");
  NCHECK(f != NULL);
  int n = f(what);
  dlclose(h);
  return n;
}

static void forward(ncclComm_t comm) {
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];
  float g[8 * 16];
  NOK(ncclAllReduce(x, y, 8, ncclFloat32, ncclSum, comm, NULL));
  float mark = y[0];
  NCHECK(mark >= 1000 + 17 + rank && mark == y[7]); /* the fake's mark, not a sum */
  /* every rank's twin got the same id: mark - rank is the same everywhere */
  float base = mark - (float)rank, all[16];
  NOK(ncclAllGather(&base, all, 1, ncclFloat32, comm, NULL)); /* native */
  for (int r = 0; r < nranks; r++) NCHECK(all[r] == base);
  NOK(ncclGroupStart());
  NOK(ncclAllReduce(x, y, 8, ncclFloat32, ncclSum, comm, NULL));
  NOK(ncclAllGather(x, g, 8, ncclFloat32, comm, NULL));
  NOK(ncclGroupEnd());
  NCHECK(y[3] == mark);
  for (int r = 0; r < nranks; r++) NCHECK(g[r * 8 + 2] == 3.0f); /* the native allgather ran */
  NCHECK(fake_calls(0) == 1 && fake_calls(2) == 2 && fake_calls(3) == 0 && fake_calls(4) == 1 && fake_calls(5) == 1);
  NERR(ncclDevCommCreate(comm, NULL, NULL), ncclInvalidUsage, "has no device API");
  /* a split's first forwarded call inside a group: its twin must be made before the real group */
  ncclComm_t child;
  NOK(ncclCommSplit(comm, 0, rank, &child, NULL));
  NOK(ncclGroupStart());
  NOK(ncclAllReduce(x, y, 8, ncclFloat32, ncclSum, child, NULL));
  NOK(ncclGroupEnd());
  NCHECK(y[0] >= 1000 + 17 + rank);
  NOK(ncclCommDestroy(child));
  NOK(ncclCommDestroy(comm));
}

int main(int argc, char** argv) {
  if (argc != 3) NFAIL("usage: nccl_fallback forward|preloaded|missing|self IDFILE (under mscclpp-run)");
  rank = env_int("MSCCLPP_RANK", -1), nranks = env_int("MSCCLPP_WORLD_SIZE", -1);
  char path[4096];
  snprintf(path, sizeof(path), "%s.%s", argv[2], getenv("MSCCLPP_MASTER_PORT") ? getenv("MSCCLPP_MASTER_PORT") : "0");
  ncclUniqueId id = share_id(rank, path);
  ncclComm_t comm;
  NOK(ncclCommInitRank(&comm, nranks, id, rank));
  if (!strcmp(argv[1], "preloaded")) NCHECK(dlopen(getenv("MSCCLPP_NCCL_LIB_PATH"), RTLD_NOW | RTLD_GLOBAL) != NULL);
  if (!strcmp(argv[1], "forward") || !strcmp(argv[1], "preloaded")) {
    forward(comm);
    NCHECK(fake_calls(1) == 2); /* each twin went with its communicator */
#if !defined(__SANITIZE_ADDRESS__)
    NCHECK(fake_calls(7) == fake_calls(2)); /* every forwarded allreduce asked the fake's own function */
#endif
  } else if (!strcmp(argv[1], "missing") || !strcmp(argv[1], "self")) {
    float x[4] = {0}, g[16];
    const char* why = argv[1][0] == 'm' ? "MSCCLPP_NCCL_LIB_PATH is not set" : "is this library, not a real NCCL";
    NERR(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, NULL), ncclInvalidUsage, why);
    NOK(ncclAllGather(x, g, 1, ncclFloat32, comm, NULL)); /* what is not forced is native */
    NOK(ncclCommDestroy(comm));
  } else {
    NFAIL("unknown mode %s", argv[1]);
  }
  if (rank == 0) unlink(path);
  printf("rank %d: fallback %s OK\n", rank, argv[1]);
  return 0;
}
