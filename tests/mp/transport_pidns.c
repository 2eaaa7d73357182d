/* transport_pidns.c - peer liveness across PID namespaces (issue 22, item 7), 2 ranks of one host.
 * Rank 1 re-executes itself in a new user and PID namespace (`unshare --user --map-root-user --pid
 * --fork`; skipped, exit 77, where unprivileged namespaces are not allowed), so its pid means
 * nothing, or another process, in rank 0's namespace, while host name and boot id are the same.
 *   1. rank 0 waits on a host semaphore that rank 1 signals only after 1.5 s: the wait succeeds
 *      (a live peer used to be declared dead after 20 ms: kill(pid, 0) on a foreign pid);
 *   2. rank 1 then exits without teardown: rank 0's next wait fails naming rank 1 within 5 s (the
 *      target is 2 s; slack for a loaded CI machine), where a dead one used to go unnoticed for the
 *      wait's whole 60 s (kill(1, 0) on rank 1's inner pid 1 found rank 0's init alive).
 * The connection is shm, so only the liveness check, not a socket of the transport, can tell.
 * Step 1 can only show the old bug where rank 1's inner pid is free in rank 0's namespace: inside a
 * fresh namespace it is 1, which always exists; the pid is now compared only within a namespace. */
#include <sys/wait.h>
#include <unistd.h>

#include "transport_mp.h"

/* 1 when this machine lets an unprivileged user make a PID namespace. */
static int namespaces_work(void) {
  return system("unshare --user --map-root-user --pid --fork true >/dev/null 2>&1") == 0;
}

int main(int argc, char** argv) {
  (void)argc;
  int rank_env = atoi(getenv("MSCCLPP_RANK") ? getenv("MSCCLPP_RANK") : "-1");
  if (rank_env == 1 && !getenv("MPP_TEST_IN_PIDNS")) {
    if (!namespaces_work()) TEST_SKIP("unprivileged PID namespaces are not available here");
    setenv("MPP_TEST_IN_PIDNS", "1", 1);
    execlp("unshare", "unshare", "--user", "--map-root-user", "--pid", "--fork", argv[0], (char*)NULL);
    TEST_FAIL("exec unshare failed");
  }
  if (rank_env == 0 && !namespaces_work()) {
    /* rank 1 skips too; say so the same way */
    TEST_SKIP("unprivileged PID namespaces are not available here");
  }
  int rank, n;
  mscclppComm_t comm = tmp_init(&rank, &n);
  CHECK_MSG(n == 2, "needs 2 ranks");
  mscclppConnection_t conn;
  CHECK_OK(mscclppConnectionCreate(comm, 1 - rank, 0, mscclppTransportSHM, &conn));
  mscclppHostSemaphore_t sem;
  CHECK_OK(mscclppHostSemaphoreCreate(comm, conn, &sem));
  if (rank == 1) {
    usleep(1500000);
    CHECK_OK(mscclppHostSemaphoreSignal(sem));
    int v;
    CHECK_OK(mscclppBootstrapRecv(comm, 0, 1, &v, sizeof(v))); /* rank 0 saw the signal */
    _exit(0);                                                  /* no teardown */
  }
  double t0 = tmp_now();
  CHECK_OK(mscclppHostSemaphoreWait(sem, 30000));
  printf("transport_pidns: the live peer's signal came after %.2f s\n", tmp_now() - t0);
  int v = 1;
  CHECK_OK(mscclppBootstrapSend(comm, 1, 1, &v, sizeof(v)));
  t0 = tmp_now();
  CHECK_RES(mscclppHostSemaphoreWait(sem, 60000), mscclppRemoteError);
  CHECK_ERR_MENTIONS("rank 1");
  double dt = tmp_now() - t0;
  CHECK_MSG(dt < 5.0, "noticing the dead peer in another PID namespace took %.1f s", dt);
  printf("transport_pidns: dead peer noticed in %.2f s: %s\n", dt, mscclppGetLastError());
  CHECK_OK(mscclppCommAbort(comm));
  return 0;
}
