/* Host semaphores between two ranks: a wait that times out names the peer and the step and does
 * not consume it; poll; many signals waited one by one; ping-pong; independent semaphores on one
 * connection.
 *
 *   transport_semaphore TRANSPORT */
#include "transport_mp.h"

#define TAG_SYNC 11

static void sync_msg(mscclppComm_t comm, int rank, int from) {
  int v = 0;
  if (rank == from)
    CHECK_OK(mscclppBootstrapSend(comm, 1 - rank, TAG_SYNC, &v, sizeof(v)));
  else
    CHECK_OK(mscclppBootstrapRecv(comm, 1 - rank, TAG_SYNC, &v, sizeof(v)));
}

static void test_timeout(mscclppComm_t comm, int rank, mscclppHostSemaphore_t sem) {
  if (rank == 1) {
    int ready = 1;
    CHECK_OK(mscclppHostSemaphorePoll(sem, &ready));
    CHECK(ready == 0);
    double t0 = tmp_now();
    CHECK_RES(mscclppHostSemaphoreWait(sem, 200), mscclppTimeout);
    double dt = tmp_now() - t0;
    CHECK_MSG(dt >= 0.19 && dt < 5, "a 200 ms wait took %.3f s", dt);
    CHECK_ERR_MENTIONS("rank 0");
    CHECK_ERR_MENTIONS("step 1");
    CHECK_RES(mscclppHostSemaphoreWait(sem, 0), mscclppTimeout);
  }
  sync_msg(comm, rank, 1); /* rank 0 signals only after rank 1 timed out */
  if (rank == 0) CHECK_OK(mscclppHostSemaphoreSignal(sem));
  if (rank == 1) CHECK_OK(mscclppHostSemaphoreWait(sem, -1)); /* step 1 is still the one awaited */
}

static void test_many(mscclppComm_t comm, int rank, mscclppHostSemaphore_t sem) {
  const int count = 1000;
  if (rank == 0)
    for (int i = 0; i < count; i++) CHECK_OK(mscclppHostSemaphoreSignal(sem));
  if (rank == 1) {
    for (int i = 0; i < count; i++) CHECK_OK(mscclppHostSemaphoreWait(sem, 20000));
    int ready = 1;
    CHECK_OK(mscclppHostSemaphorePoll(sem, &ready));
    CHECK(ready == 0);
  }
  CHECK_OK(mscclppBootstrapBarrier(comm));
}

static void test_poll(int rank, mscclppHostSemaphore_t sem) {
  if (rank == 0) CHECK_OK(mscclppHostSemaphoreSignal(sem));
  if (rank != 1) return;
  int ready = 0;
  double t0 = tmp_now();
  while (!ready) {
    CHECK_OK(mscclppHostSemaphorePoll(sem, &ready));
    CHECK_MSG(tmp_now() - t0 < 20, "poll never saw the signal");
  }
  CHECK_OK(mscclppHostSemaphorePoll(sem, &ready));
  CHECK(ready == 0); /* consumed */
}

static void test_ping_pong(int rank, mscclppHostSemaphore_t sem, const char* tname) {
  const int rounds = 2000;
  double t0 = tmp_now();
  for (int i = 0; i < rounds; i++) {
    if (rank == 0) CHECK_OK(mscclppHostSemaphoreSignal(sem));
    CHECK_OK(mscclppHostSemaphoreWait(sem, 20000));
    if (rank == 1) CHECK_OK(mscclppHostSemaphoreSignal(sem));
  }
  if (rank == 0) printf("transport_semaphore %s: ping-pong %.2f us per round trip\n", tname, (tmp_now() - t0) / rounds * 1e6);
}

/* Three semaphores on one connection do not see each other's signals. */
static void test_independent(mscclppComm_t comm, int rank, mscclppConnection_t conn) {
  mscclppHostSemaphore_t s[3];
  for (int i = 0; i < 3; i++) CHECK_OK(mscclppHostSemaphoreCreate(comm, conn, &s[i]));
  if (rank == 0) CHECK_OK(mscclppHostSemaphoreSignal(s[2]));
  if (rank == 1) {
    CHECK_OK(mscclppHostSemaphoreWait(s[2], 20000));
    int ready = 1;
    CHECK_OK(mscclppHostSemaphorePoll(s[0], &ready));
    CHECK(ready == 0);
    CHECK_OK(mscclppHostSemaphorePoll(s[1], &ready));
    CHECK(ready == 0);
  }
  CHECK_OK(mscclppBootstrapBarrier(comm));
  for (int i = 0; i < 3; i++) CHECK_OK(mscclppHostSemaphoreDestroy(s[i]));
}

int main(int argc, char** argv) {
  if (argc < 2) TEST_FAIL("usage: %s shm|tcp|auto", argv[0]);
  int rank, n;
  mscclppComm_t comm = tmp_init(&rank, &n);
  if (n != 2) TEST_FAIL("needs exactly 2 ranks");
  mscclppConnection_t conn;
  CHECK_OK(mscclppConnectionCreate(comm, 1 - rank, 3, tmp_transport(argv[1]), &conn));
  mscclppHostSemaphore_t sem;
  CHECK_OK(mscclppHostSemaphoreCreate(comm, conn, &sem));
  test_timeout(comm, rank, sem);
  test_many(comm, rank, sem);
  test_poll(rank, sem);
  CHECK_OK(mscclppBootstrapBarrier(comm));
  test_ping_pong(rank, sem, argv[1]);
  test_independent(comm, rank, conn);
  CHECK_OK(mscclppHostSemaphoreDestroy(sem));
  CHECK_OK(mscclppConnectionDestroy(conn));
  CHECK_OK(mscclppCommDestroy(comm));
  return 0;
}
