/* The seed API between CPU ranks (every pair connected, two tags per pair): mscclppConnect,
 * mscclppConnectionSetup, the device connections' put / signal / putWithSignal /
 * putWithSignalAndFlush / flush / wait driven by host threads through the proxy, mscclppProxyStop,
 * and mscclppRegisteredBufferWrite.
 *
 *   devconn_cpu TRANSPORT */
#include <mscclpp/mscclpp.h>

#include "chan_mp.h"

#define BYTES 65536u
#define TAGS 2

int main(int argc, char** argv) {
  if (argc < 2) TEST_FAIL("usage: devconn_cpu TRANSPORT");
  int rank = 0, nranks = 0;
  mscclppComm_t comm = cm_init(&rank, &nranks);
  mscclppTransport_t tr = cm_transport(argv[1]);
  unsigned char* buf[TAGS];
  for (int t = 0; t < TAGS; t++) {
    /* Slot r of each buffer is written by rank r. */
    CHECK_OK(mscclppMemAlloc((void**)&buf[t], BYTES * (size_t)nranks, mscclppMemHost));
    for (int p = 0; p < nranks; p++)
      if (p != rank) CHECK_OK(mscclppConnect(comm, p, t, buf[t], BYTES * (uint64_t)nranks, tr, NULL));
  }
  CHECK_RES(mscclppConnect(comm, rank == 0 ? 1 : 0, 0, buf[0], BYTES, tr, NULL), mscclppInvalidUsage); /* twice */
  CHECK_RES(mscclppConnect(comm, rank == 0 ? 1 : 0, 9, buf[0], BYTES, mscclppTransportIB, "mlx5_0"), mscclppInvalidUsage);
  CHECK_RES(mscclppProxyLaunch(comm), mscclppInvalidUsage); /* nothing set up yet */
  CHECK_OK(mscclppConnectionSetup(comm));
  mscclppDevConn_t* conns = NULL;
  int n = 0;
  CHECK_OK(mscclppGetAllDeviceConnections(comm, &conns, &n));
  CHECK(n == TAGS * (nranks - 1));
  CHECK_OK(mscclppProxyLaunch(comm));
  /* Every connection: write my slot of the peer's buffer (put, put, then signal; or
   * putWithSignal; or putWithSignalAndFlush), then wait for the peer's. */
  uint64_t slot = (uint64_t)rank * BYTES;
  for (int i = 0; i < n; i++) {
    mscclppDevConn_t* c = &conns[i];
    unsigned char* b = c->localBuff;
    for (uint64_t k = 0; k < BYTES; k++) b[slot + k] = cm_byte(c->tag, rank, k);
    if (i % 3 == 0) {
      CHECK(mscclppDevConnPut(c, slot, slot, BYTES / 2) == MSCCLPP_DEVICE_OK);
      CHECK(mscclppDevConnPut(c, slot + BYTES / 2, slot + BYTES / 2, BYTES / 2) == MSCCLPP_DEVICE_OK);
      CHECK(mscclppDevConnSignal(c) == MSCCLPP_DEVICE_OK);
    } else if (i % 3 == 1) {
      CHECK(mscclppDevConnPutWithSignal(c, slot, slot, BYTES) == MSCCLPP_DEVICE_OK);
    } else {
      CHECK(mscclppDevConnPutWithSignalAndFlush(c, slot, slot, BYTES) == MSCCLPP_DEVICE_OK);
    }
    CHECK(mscclppDevConnFlush(c) == MSCCLPP_DEVICE_OK);
  }
  for (int i = 0; i < n; i++) {
    mscclppDevConn_t* c = &conns[i];
    CHECK(mscclppDevConnWait(c) == MSCCLPP_DEVICE_OK);
    const unsigned char* b = c->localBuff;
    uint64_t theirs = (uint64_t)c->remoteRank * BYTES;
    for (uint64_t k = 0; k < BYTES; k++)
      CHECK_MSG(b[theirs + k] == cm_byte(c->tag, c->remoteRank, k), "tag %d from rank %d: byte %llu", c->tag,
                c->remoteRank, (unsigned long long)k);
  }
  mscclppDevConn_t* one = NULL;
  CHECK_OK(mscclppGetDeviceConnection(comm, conns[0].remoteRank, 1, &one));
  CHECK(one->tag == 1 && one->remoteRank == conns[0].remoteRank);
  CHECK_RES(mscclppGetDeviceConnection(comm, rank, 0, &one), mscclppInvalidArgument);
  CHECK_OK(mscclppBootstrapBarrier(comm));
  CHECK_OK(mscclppProxyStop(comm));

  /* mscclppRegisteredBufferWrite: every rank writes its slot into every peer's buffer (mapped here:
   * the ranks share a host, whatever transport the connections use). */
  unsigned char* rb = NULL;
  CHECK_OK(mscclppMemAlloc((void**)&rb, 4096 * (size_t)nranks, mscclppMemHost));
  mscclppRegisteredMemory reg;
  CHECK_OK(mscclppRegisterBuffer(comm, rb, 4096 * (size_t)nranks, &reg));
  unsigned char src[4096];
  memset(src, 0x40 + rank, sizeof(src));
  CHECK_RES(mscclppRegisteredBufferWrite(comm, &reg, src, 4096, 0, (uint64_t)nranks * 4096 - 100, 0),
            mscclppInvalidArgument);
  CHECK_OK(mscclppRegisteredBufferWrite(comm, &reg, src, 4096, 0, (uint64_t)rank * 4096, 0));
  CHECK_OK(mscclppBootstrapBarrier(comm));
  for (int p = 0; p < nranks; p++)
    if (p != rank)
      for (int k = 0; k < 4096; k++) CHECK(rb[(size_t)p * 4096 + k] == 0x40 + p);
  CHECK_OK(mscclppBootstrapBarrier(comm));
  CHECK_OK(mscclppRegisteredMemoryRelease(&reg));
  CHECK_OK(mscclppCommReleaseChannels(comm));
  CHECK_OK(mscclppBootstrapBarrier(comm));
  CHECK_OK(mscclppMemFree(rb));
  for (int t = 0; t < TAGS; t++) CHECK_OK(mscclppMemFree(buf[t]));
  CHECK_OK(mscclppCommDestroy(comm));
  if (rank == 0) printf("devconn_cpu %s: %d ranks, %d connections each: ok\n", argv[1], nranks, n);
  return 0;
}
