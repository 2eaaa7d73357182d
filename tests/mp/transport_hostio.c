/* The library-internal host-memory path of connections (core/connection.h), which the CPU plan
 * executor uses for ranks of other hosts: over tcp, rank 0 reads rank 1's registered memory
 * (ranges past the transport's 1 MiB chunk, odd offsets and lengths), writes into it from memory
 * it never registered, and reads back what it wrote (a read comes after the connection's earlier
 * writes); a range past the buffer is refused here, a read of a registration the peer released is
 * refused there (RemoteError naming it) and the connection carries on; a shm connection cannot
 * read it (plain host memory is reachable over tcp only) and says so.
 *
 * With the argument net, the same over a net connection (libfabric), less the refused read (a
 * failed read breaks a net connection rather than being reported by the peer).
 *
 *   transport_hostio [net]       under mscclpp-run -n 2 */
#include "transport_mp.h"

#include "core/connection.h"

#define BYTES ((3u << 20) + 77)
#define TAG_BLOB 31

/* Reads [off, off + n) of rank 1's buffer and checks it against the pattern of `round`. */
static void read_and_check(mscclppConnection_t conn, mscclppRegMem_t peer, uint64_t off, uint64_t n, int round) {
  unsigned char* got = malloc(n ? n : 1);
  CHECK(got != NULL);
  memset(got, 0xee, n);
  CHECK_OK(connection_read_host(conn, got, peer, off, n));
  for (uint64_t i = 0; i < n; i++)
    if (got[i] != tmp_byte(round, 1, 0, off + i))
      TEST_FAIL("read of %llu bytes at %llu: byte %llu is 0x%02x, expected 0x%02x", (unsigned long long)n,
                (unsigned long long)off, (unsigned long long)i, got[i], tmp_byte(round, 1, 0, off + i));
  free(got);
}

/* Rank 0 writes pattern `round` into [off, off + n) of rank 1's buffer from unregistered memory. */
static void write_pattern(mscclppConnection_t conn, mscclppRegMem_t peer, uint64_t off, uint64_t n, int round) {
  unsigned char* src = malloc(n);
  CHECK(src != NULL);
  for (uint64_t i = 0; i < n; i++) src[i] = tmp_byte(round, 1, 0, off + i);
  CHECK_OK(connection_write_host(conn, peer, off, src, n));
  free(src); /* reusable once the call returned */
}

/* A registration rank 1 made and released: rank 0's read of it is refused by rank 1's receiver. */
static void test_refused(mscclppComm_t comm, int rank, mscclppConnection_t conn, mscclppRegisteredMemory* reg) {
  mscclppRegMem_t gone = tmp_released_reg(comm, rank, TAG_BLOB);
  if (rank == 1) return;
  char dst[64];
  CHECK_RES(connection_read_host(conn, dst, gone, 8, sizeof(dst)), mscclppRemoteError);
  CHECK_ERR_MENTIONS("refused");
  CHECK_ERR_MENTIONS("offset 8");
  CHECK_OK(mscclppRegMemRelease(gone));
  read_and_check(conn, reg->remote[1], 5, 100, 2); /* the connection carries on */
}

int main(int argc, char** argv) {
  int rank, n;
  mscclppComm_t comm = tmp_init(&rank, &n);
  mscclppTransport_t t = argc > 1 ? tmp_transport(argv[1]) : mscclppTransportTCP;
  if (n != 2) TEST_FAIL("needs exactly 2 ranks");
  unsigned char* buf = malloc(BYTES); /* plain host memory: reachable over tcp only */
  CHECK(buf != NULL);
  for (uint64_t i = 0; i < BYTES; i++) buf[i] = tmp_byte(1, 1, 0, i);
  mscclppRegisteredMemory reg;
  CHECK_OK(mscclppRegisterBuffer(comm, buf, BYTES, &reg));
  mscclppConnection_t conn, shm;
  CHECK_OK(mscclppConnectionCreate(comm, 1 - rank, 0, t, &conn));
  CHECK_OK(mscclppConnectionCreate(comm, 1 - rank, 1, mscclppTransportSHM, &shm));
  if (rank == 0) {
    read_and_check(conn, reg.remote[1], 0, BYTES, 1); /* several chunks */
    read_and_check(conn, reg.remote[1], 12345, 7, 1);
    read_and_check(conn, reg.remote[1], BYTES - 1, 1, 1);
    read_and_check(conn, reg.remote[1], 3, 0, 1);
    /* Written, then read back at once: the read follows the writes on the connection. */
    write_pattern(conn, reg.remote[1], 1001, (1u << 20) + 13, 2);
    write_pattern(conn, reg.remote[1], 0, 1001, 2);
    write_pattern(conn, reg.remote[1], 5, 100, 2);
    read_and_check(conn, reg.remote[1], 0, (1u << 20) + 1014, 2);
    CHECK_OK(mscclppConnectionFlush(conn, -1));
    char dst[32];
    CHECK_RES(connection_read_host(conn, dst, reg.remote[1], BYTES - 10, 20), mscclppInvalidArgument);
    CHECK_ERR_MENTIONS("exceed");
    CHECK_RES(connection_write_host(conn, reg.remote[1], BYTES, dst, 1), mscclppInvalidArgument);
    CHECK_RES(connection_read_host(shm, dst, reg.remote[1], 0, 8), mscclppInvalidUsage); /* not shm memory */
    CHECK_ERR_MENTIONS("shm connection");
  }
  CHECK_OK(mscclppBootstrapBarrier(comm)); /* rank 0's writes landed (its flush returned) */
  if (rank == 1)
    for (uint64_t i = 0; i < (1u << 20) + 1014; i++)
      if (buf[i] != tmp_byte(2, 1, 0, i))
        TEST_FAIL("byte %llu is 0x%02x after rank 0's host writes, expected 0x%02x", (unsigned long long)i, buf[i],
                  tmp_byte(2, 1, 0, i));
  if (t == mscclppTransportTCP) test_refused(comm, rank, conn, &reg);
  CHECK_OK(mscclppBootstrapBarrier(comm));
  CHECK_OK(mscclppConnectionDestroy(shm));
  CHECK_OK(mscclppConnectionDestroy(conn));
  CHECK_OK(mscclppRegisteredMemoryRelease(&reg));
  free(buf);
  CHECK_OK(mscclppCommDestroy(comm));
  if (rank == 0) printf("transport_hostio %s: ok\n", argc > 1 ? argv[1] : "tcp");
  return 0;
}
