/* A rank that dies between two calls of a plan on CPU ranks of one host: every survivor's next
 * call fails with RemoteError naming it, long before the executor's wait bound (set to 60 s by
 * the test), because waits check now and then whether a rank of this host has exited.
 *
 *   plan_peerdeath PLAN (an allreduce plan for the world size; under mscclpp-run) */
#include "transport_mp.h"

int main(int argc, char** argv) {
  int rank, n;
  CHECK_MSG(argc == 2, "usage: plan_peerdeath PLAN");
  mscclppComm_t comm = tmp_init(&rank, &n);
  mscclppPlan_t plan;
  CHECK_OK(mscclppPlanLoadFile(argv[1], &plan));
  float in[1024], out[1024];
  for (int i = 0; i < 1024; i++) in[i] = (float)(rank + i);
  CHECK_OK(mscclppExecutePlan(comm, plan, in, out, sizeof(in), sizeof(out), mscclppFloat, NULL));
  CHECK_MSG(out[5] == (float)(n * (n - 1) / 2 + 5 * n), "rank %d: out[5] = %g", rank, (double)out[5]);
  if (rank == 1) exit(0); /* dies: no teardown, no further call */
  double t0 = tmp_now();
  CHECK_RES(mscclppExecutePlan(comm, plan, in, out, sizeof(in), sizeof(out), mscclppFloat, NULL), mscclppRemoteError);
  CHECK_ERR_MENTIONS("rank 1");
  CHECK_MSG(tmp_now() - t0 < 10.0, "rank %d: noticing the dead rank took %.1f s", rank, tmp_now() - t0);
  printf("plan_peerdeath: rank %d saw rank 1 gone after %.2f s: %s\n", rank, tmp_now() - t0, mscclppGetLastError());
  exit(0); /* the communicator's peer is gone: skip the orderly teardown */
}
