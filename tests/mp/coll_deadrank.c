/* coll_deadrank.c - in tcp mode every survivor names the rank that died (issue 22, item 10).
 * 4 CPU ranks, each its own "host" (MSCCLPP_HOST_ID=host<rank>, so every connection is tcp), run
 * allreduces in a loop; rank 2 exits without teardown at iteration 5. Each survivor's failing call
 * must return RemoteError naming rank 2 within 5 s (the target is 2 s; slack for a loaded CI
 * machine), even though the survivors abort their communicators as soon as they fail (which breaks
 * their connections to the others: two of three survivors used to name one of those instead).
 * With COLL_DEADRANK_HOSTS=H rank r is on host r % H instead (H=2: the table's hierarchical
 * allreduce, where a survivor may be waiting on another survivor, not on rank 2: it must still name
 * rank 2, through the bootstrap's liveness). */
#include <unistd.h>

#include "transport_mp.h"

#define VICTIM 2
#define COUNT 4096

int main(void) {
  const char* r = getenv("MSCCLPP_RANK");
  char host[32];
  const char* hosts = getenv("COLL_DEADRANK_HOSTS");
  if (hosts != NULL) snprintf(host, sizeof(host), "host%d", atoi(r ? r : "0") % atoi(hosts));
  else snprintf(host, sizeof(host), "host%s", r ? r : "?");
  setenv("MSCCLPP_HOST_ID", host, 1);
  int rank, n;
  mscclppComm_t comm = tmp_init(&rank, &n);
  CHECK_MSG(n == 4, "needs 4 ranks");
  static float in[COUNT], out[COUNT];
  for (int i = 0; i < COUNT; i++) in[i] = (float)rank;
  for (int it = 0;; it++) {
    if (rank == VICTIM && it == 5) _exit(0);
    double t0 = tmp_now();
    mscclppResult_t res = mscclppAllReduce(in, out, COUNT, mscclppFloat, mscclppSum, comm, NULL);
    if (res == mscclppSuccess) {
      CHECK_MSG(out[7] == 6.0f, "rank %d: iteration %d: out[7] = %g", rank, it, (double)out[7]);
      CHECK_MSG(it < 1000, "rank %d: the death of rank %d was never noticed", rank, VICTIM);
      continue;
    }
    double dt = tmp_now() - t0;
    char e[1024];
    snprintf(e, sizeof(e), "%s", mscclppGetLastError());
    mscclppCommAbort(comm); /* at once, as an application does: the others see our connections end */
    CHECK_MSG(res == mscclppRemoteError, "rank %d: allreduce returned %d: %s", rank, (int)res, e);
    CHECK_MSG(strstr(e, "rank 2 died") || strstr(e, "rank 2 "), "rank %d: the error does not name rank 2: %s", rank, e);
    for (int other = 0; other < 4; other++) { /* and no survivor is blamed */
      char who[32];
      snprintf(who, sizeof(who), "rank %d died", other);
      CHECK_MSG(other == VICTIM || !strstr(e, who), "rank %d blames rank %d: %s", rank, other, e);
    }
    CHECK_MSG(dt < 5.0, "rank %d: the failing allreduce took %.1f s", rank, dt);
    printf("coll_deadrank: rank %d failed after %.2f s: %s\n", rank, dt, e);
    usleep(1000000); /* the others fail on their own, not from our exit */
    return 0;
  }
}
