/* bootstrap_retry.c - a failed mscclppCommInitRank on rank 0 leaves no root behind (issue 22,
 * item 9), 2 ranks. Rank 0, on mscclpp-run's root port:
 *   1. init with a NULL comm, nranks 0, rank outside [0, nranks): InvalidArgument, and the port is
 *      free right after each (no root was started);
 *   2. init on 192.0.2.1 (TEST-NET, not an address of this host): an error naming that address,
 *      and nothing listens on the port (no silent fall back to 0.0.0.0);
 *   3. init alone with a 1 s timeout (rank 1 comes later): Timeout, and the port is free within
 *      2.5 s of the failure (the root used to hold it for about 125 s);
 *   4. the corrected init on the same port, which rank 1 joins: success, then a barrier. */
#include <arpa/inet.h>
#include <netinet/in.h>

#include "bootstrap_mp.h"

/* 1 when nothing listens on port (we can bind it ourselves). */
static int port_free(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int ok = bind(fd, (struct sockaddr*)&a, sizeof(a)) == 0 && listen(fd, 1) == 0;
  close(fd);
  return ok;
}

static void rank0(const char* root, int port) {
  mscclppComm_t comm = NULL;
  CHECK_RES(mscclppCommInitRank(NULL, 2, root, 0), mscclppInvalidArgument);
  CHECK_MSG(port_free(port), "a root listens on port %d after an init with a NULL comm", port);
  CHECK_RES(mscclppCommInitRank(&comm, 0, root, 0), mscclppInvalidArgument);
  CHECK_RES(mscclppCommInitRank(&comm, 2, root, 5), mscclppInvalidArgument);
  CHECK_MSG(port_free(port), "a root listens on port %d after an init with bad nranks or rank", port);

  char away[64];
  snprintf(away, sizeof(away), "192.0.2.1:%d", port);
  mscclppResult_t r = mscclppCommInitRank(&comm, 2, away, 0);
  CHECK_MSG(r != mscclppSuccess && strstr(mscclppGetLastError(), "192.0.2.1"),
            "an init on a foreign address returned %d without naming it: %s", (int)r, mscclppGetLastError());
  CHECK_MSG(port_free(port), "a root fell back to the wildcard address on port %d", port);

  CHECK_OK(mscclppSetBootstrapConnTimeout(1));
  CHECK_RES(mscclppCommInitRank(&comm, 2, root, 0), mscclppTimeout);
  double t0 = mp_now();
  while (!port_free(port)) {
    CHECK_MSG(mp_now() - t0 < 2.5, "the failed init's root still holds port %d after %.1f s", port, mp_now() - t0);
    usleep(20000);
  }
  printf("bootstrap_retry: port free %.3f s after the failed init\n", mp_now() - t0);
  CHECK_OK(mscclppSetBootstrapConnTimeout(30));
  CHECK_OK(mscclppCommInitRank(&comm, 2, root, 0));
  CHECK_OK(mscclppBootstrapBarrier(comm));
  CHECK_OK(mscclppCommDestroy(comm));
}

int main(void) {
  int rank = mp_env_int("MSCCLPP_RANK");
  CHECK_MSG(mp_env_int("MSCCLPP_WORLD_SIZE") == 2, "needs 2 ranks");
  char root[300];
  mp_root(root, sizeof(root));
  CHECK_MSG(strncmp(root, "127.0.0.1:", 10) == 0, "expects a loopback root, got %s", root);
  int port = mp_env_int("MSCCLPP_MASTER_PORT");
  if (rank == 0) {
    rank0(root, port);
    printf("bootstrap_retry: OK\n");
    return 0;
  }
  usleep(3000000); /* after rank 0's failed attempts (about 1 s) */
  mscclppComm_t comm;
  CHECK_OK(mscclppSetBootstrapConnTimeout(30));
  CHECK_OK(mscclppCommInitRank(&comm, 2, root, 1));
  CHECK_OK(mscclppBootstrapBarrier(comm));
  CHECK_OK(mscclppCommDestroy(comm));
  return 0;
}
