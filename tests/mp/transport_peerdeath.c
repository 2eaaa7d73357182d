/* A peer that dies: rank 1 sets up a connection, a semaphore and registered memory with rank 0,
 * then exits without any teardown. Rank 0's semaphore wait and (over tcp) flush must fail with
 * RemoteError promptly, naming the peer, instead of waiting for their timeouts; teardown must not
 * hang.
 *
 *   transport_peerdeath TRANSPORT */
#include <unistd.h>

#include "transport_mp.h"

#define BYTES (1u << 20)

int main(int argc, char** argv) {
  if (argc < 2) TEST_FAIL("usage: %s shm|tcp|net", argv[0]);
  int rank, n;
  mscclppComm_t comm = tmp_init(&rank, &n);
  if (n != 2) TEST_FAIL("needs exactly 2 ranks");
  mscclppTransport_t t = tmp_transport(argv[1]);
  unsigned char* buf = NULL;
  CHECK_OK(mscclppMemAlloc((void**)&buf, BYTES, mscclppMemHost));
  mscclppRegisteredMemory reg;
  CHECK_OK(mscclppRegisterBuffer(comm, buf, BYTES, &reg));
  mscclppConnection_t conn;
  CHECK_OK(mscclppConnectionCreate(comm, 1 - rank, 0, t, &conn));
  mscclppHostSemaphore_t sem;
  CHECK_OK(mscclppHostSemaphoreCreate(comm, conn, &sem));
  int v = 1;
  if (rank == 1) {
    CHECK_OK(mscclppBootstrapRecv(comm, 0, 1, &v, sizeof(v))); /* rank 0's setup is done too */
    _exit(0);                                                  /* as if it crashed: no teardown at all */
  }
  CHECK_OK(mscclppBootstrapSend(comm, 1, 1, &v, sizeof(v)));
  double t0 = tmp_now();
  CHECK_RES(mscclppHostSemaphoreWait(sem, 30000), mscclppRemoteError);
  CHECK_ERR_MENTIONS("rank 1");
  double dt = tmp_now() - t0;
  CHECK_MSG(dt < 10, "the wait took %.1f s to notice the dead peer", dt);
  if (t == mscclppTransportTCP || t == mscclppTransportNet) {
    /* The write may still fit the socket buffer; the flush cannot be acknowledged. */
    mscclppResult_t r = mscclppConnectionWrite(conn, reg.remote[1], 0, reg.local, 0, BYTES);
    CHECK_MSG(r == mscclppSuccess || r == mscclppRemoteError, "write returned %d: %s", (int)r, mscclppGetLastError());
    CHECK_RES(mscclppConnectionFlush(conn, 30000), mscclppRemoteError);
    CHECK_RES(mscclppConnectionFlush(conn, 30000), mscclppRemoteError);
    CHECK_RES(mscclppHostSemaphoreSignal(sem), mscclppRemoteError);
  }
  CHECK_MSG(tmp_now() - t0 < 10, "noticing the dead peer took %.1f s", tmp_now() - t0);
  printf("transport_peerdeath %s: dead peer noticed in %.3f s\n", argv[1], dt);
  CHECK_OK(mscclppHostSemaphoreDestroy(sem));
  CHECK_OK(mscclppConnectionDestroy(conn));
  CHECK_OK(mscclppRegisteredMemoryRelease(&reg));
  CHECK_OK(mscclppMemFree(buf));
  CHECK_OK(mscclppCommAbort(comm));
  return 0;
}
