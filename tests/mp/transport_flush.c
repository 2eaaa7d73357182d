/* Flush semantics between two ranks: once rank 0's flush returns, rank 1 finds every byte of the
 * earlier writes in its memory without any semaphore (told only through the bootstrap); idle
 * flushes return at once; over tcp a write the receiver refuses (to a released registration)
 * makes the next flush fail naming it, and the connection stays usable.
 *
 *   transport_flush TRANSPORT */
#include "transport_mp.h"

#define BYTES ((4u << 20) + 3)
#define TAG_SYNC 21
#define TAG_BLOB 22

static void sync_msg(mscclppComm_t comm, int rank, int from) {
  int v = 0;
  if (rank == from)
    CHECK_OK(mscclppBootstrapSend(comm, 1 - rank, TAG_SYNC, &v, sizeof(v)));
  else
    CHECK_OK(mscclppBootstrapRecv(comm, 1 - rank, TAG_SYNC, &v, sizeof(v)));
}

static void test_flush_lands(mscclppComm_t comm, int rank, mscclppConnection_t conn, mscclppRegisteredMemory* reg,
                             unsigned char* buf) {
  for (int iter = 1; iter <= 4; iter++) {
    if (rank == 0) {
      for (uint64_t i = 0; i < BYTES; i++) buf[i] = tmp_byte(iter, 0, 1, i);
      /* In pieces of odd sizes, so that several messages are in flight before the flush. */
      for (uint64_t off = 0; off < BYTES;) {
        uint64_t n = BYTES - off < 300007 ? BYTES - off : 300007;
        CHECK_OK(mscclppConnectionWrite(conn, reg->remote[1], off, reg->local, off, n));
        off += n;
      }
      CHECK_OK(mscclppConnectionFlush(conn, -1));
    }
    sync_msg(comm, rank, 0);
    if (rank == 1)
      for (uint64_t i = 0; i < BYTES; i++)
        if (buf[i] != tmp_byte(iter, 0, 1, i))
          TEST_FAIL("iteration %d: byte %llu is 0x%02x after rank 0's flush returned, expected 0x%02x", iter,
                    (unsigned long long)i, buf[i], tmp_byte(iter, 0, 1, i));
    sync_msg(comm, rank, 1);
  }
}

static void test_idle_flush(mscclppConnection_t conn) {
  double t0 = tmp_now();
  for (int i = 0; i < 100; i++) CHECK_OK(mscclppConnectionFlush(conn, 5000));
  CHECK_MSG(tmp_now() - t0 < 5, "100 idle flushes took %.3f s", tmp_now() - t0);
}

/* Rank 1 registers a buffer, hands its blob to rank 0 and releases it; rank 0's writes to it are
 * refused by rank 1's receiver, and rank 0's flush says so. */
static void test_rejected(mscclppComm_t comm, int rank, mscclppConnection_t conn, mscclppRegisteredMemory* reg) {
  mscclppRegMem_t gone = tmp_released_reg(comm, rank, TAG_BLOB);
  if (rank == 0) {
    CHECK_OK(mscclppConnectionWrite(conn, gone, 16, reg->local, 0, 100));
    CHECK_RES(mscclppConnectionFlush(conn, -1), mscclppRemoteError);
    CHECK_ERR_MENTIONS("rejected");
    CHECK_ERR_MENTIONS("offset 16");
    uint64_t v = 0;
    CHECK_OK(mscclppConnectionUpdateAndSync(conn, gone, 8, &v, 5));
    CHECK(v == 5);
    CHECK_RES(mscclppConnectionFlush(conn, -1), mscclppRemoteError);
    /* The connection carries on. */
    CHECK_OK(mscclppConnectionWrite(conn, reg->remote[1], 0, reg->local, 0, 64));
    CHECK_OK(mscclppConnectionFlush(conn, -1));
    CHECK_OK(mscclppRegMemRelease(gone));
  }
  CHECK_OK(mscclppBootstrapBarrier(comm));
}

int main(int argc, char** argv) {
  if (argc < 2) TEST_FAIL("usage: %s shm|tcp", argv[0]);
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
  test_flush_lands(comm, rank, conn, &reg, buf);
  test_idle_flush(conn);
  if (t == mscclppTransportTCP) test_rejected(comm, rank, conn, &reg);
  CHECK_OK(mscclppBootstrapBarrier(comm));
  CHECK_OK(mscclppConnectionDestroy(conn));
  CHECK_OK(mscclppRegisteredMemoryRelease(&reg));
  CHECK_OK(mscclppMemFree(buf));
  CHECK_OK(mscclppCommDestroy(comm));
  return 0;
}
