/* Misuse and corrupted input between two ranks, each refused with a clear error and no hang:
 * mismatched or impossible transports, writes out of bounds or to unreachable memory, and
 * registered-memory blobs that were corrupted, truncated, forged or are the rank's own. */
#include <unistd.h>

#include "core/regmem.h"
#include "transport/fdpass.h"
#include "transport_mp.h"

#define BYTES 10000
#define TAG_BLOB 31

static void test_connect_errors(mscclppComm_t comm, int rank) {
  mscclppConnection_t c = NULL;
  /* Both ranks fail (neither waits for the other's timeout). */
  CHECK_RES(mscclppConnectionCreate(comm, 1 - rank, 1, rank == 0 ? mscclppTransportSHM : mscclppTransportTCP, &c),
            mscclppInvalidUsage);
  CHECK_ERR_MENTIONS("resolved transport");
  CHECK_RES(mscclppConnectionCreate(comm, 1 - rank, 2, mscclppTransportP2P, &c), mscclppInvalidUsage);
  CHECK_RES(mscclppConnectionCreate(comm, 1 - rank, 3, mscclppTransportIB, &c), mscclppInvalidUsage);
  CHECK_ERR_MENTIONS("not built");
  CHECK_RES(mscclppConnectionCreate(comm, 1 - rank, rank == 0 ? 4 : 5, mscclppTransportTCP, &c), mscclppInvalidUsage);
  CHECK_ERR_MENTIONS("tag");
  CHECK_RES(mscclppConnectionCreate(comm, rank, 1, mscclppTransportSHM, &c), mscclppInvalidArgument);
  CHECK_RES(mscclppConnectionCreate(comm, 2, 1, mscclppTransportSHM, &c), mscclppInvalidArgument);
  CHECK_RES(mscclppConnectionCreate(comm, 1 - rank, 1, (mscclppTransport_t)9, &c), mscclppInvalidArgument);
  CHECK(c == NULL);
}

/* Writes through shm: plain malloc memory of the peer cannot be reached; bounds and alignment. */
static void test_write_errors(mscclppComm_t comm, int rank) {
  char* plain = malloc(BYTES);
  unsigned char* shared = NULL;
  CHECK_OK(mscclppMemAlloc((void**)&shared, BYTES, mscclppMemHost));
  mscclppRegisteredMemory rp, rs;
  CHECK_OK(mscclppRegisterBuffer(comm, plain, BYTES, &rp));
  CHECK_OK(mscclppRegisterBuffer(comm, shared, BYTES, &rs));
  mscclppConnection_t c;
  CHECK_OK(mscclppConnectionCreate(comm, 1 - rank, 6, mscclppTransportSHM, &c));
  mscclppRegMem_t peer_plain = rp.remote[1 - rank], peer_shared = rs.remote[1 - rank];
  void* p = (void*)1;
  CHECK_OK(mscclppRegMemInfo(peer_plain, &p, NULL, NULL));
  CHECK(p == NULL); /* not mappable */
  CHECK_RES(mscclppConnectionWrite(c, peer_plain, 0, rs.local, 0, 8), mscclppInvalidUsage);
  CHECK_ERR_MENTIONS("mscclppMemAlloc(mscclppMemHost)");
  CHECK_RES(mscclppConnectionWrite(c, peer_shared, BYTES - 4, rs.local, 0, 5), mscclppInvalidArgument);
  CHECK_ERR_MENTIONS("exceed");
  CHECK_RES(mscclppConnectionWrite(c, peer_shared, UINT64_MAX - 2, rs.local, 0, 8), mscclppInvalidArgument);
  CHECK_RES(mscclppConnectionWrite(c, peer_shared, 0, rs.local, BYTES, 1), mscclppInvalidArgument);
  CHECK_RES(mscclppConnectionWrite(c, rs.local, 0, rs.local, 0, 8), mscclppInvalidUsage); /* own memory as dst */
  CHECK_RES(mscclppConnectionWrite(c, peer_shared, 0, peer_shared, 0, 8), mscclppInvalidUsage); /* peer's as src */
  uint64_t v = 0;
  CHECK_RES(mscclppConnectionUpdateAndSync(c, peer_shared, 4, &v, 1), mscclppInvalidArgument);
  CHECK_RES(mscclppConnectionUpdateAndSync(c, peer_shared, BYTES - 4, &v, 1), mscclppInvalidArgument);
  CHECK_OK(mscclppConnectionWrite(c, peer_shared, BYTES, rs.local, 0, 0)); /* empty, at the end */
  mscclppHostSemaphore_t sem;
  CHECK_OK(mscclppHostSemaphoreCreate(comm, c, &sem));
  CHECK_RES(mscclppConnectionDestroy(c), mscclppInvalidUsage); /* the semaphore still uses it */
  CHECK_OK(mscclppHostSemaphoreDestroy(sem));
  CHECK_OK(mscclppBootstrapBarrier(comm));
  CHECK_OK(mscclppConnectionDestroy(c));
  CHECK_OK(mscclppRegisteredMemoryRelease(&rp));
  CHECK_OK(mscclppRegisteredMemoryRelease(&rs));
  CHECK_OK(mscclppMemFree(shared));
  free(plain);
}

static uint64_t blob_comm_id(const unsigned char* blob) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | blob[8 + i];
  return v;
}

/* Re-encodes a valid blob with fields changed by edit: a forged but well-formed blob. */
static void forge(const unsigned char* blob, unsigned char* out, void (*edit)(struct regmem_desc*)) {
  struct regmem_desc d;
  CHECK_OK(regblob_decode(blob, regblob_bytes(), blob_comm_id(blob), 2, &d));
  edit(&d);
  regblob_encode(&d, out);
}

static void edit_pid(struct regmem_desc* d) { d->pid += 1; }
static void edit_host(struct regmem_desc* d) { d->host_hash ^= 1; }
static void edit_comm(struct regmem_desc* d) { d->comm_id ^= 1; }
static void edit_owner(struct regmem_desc* d) { d->owner = 1; }
/* The key of the shm part (struct fd_ref: the export id, then its key). */
static void edit_key(struct regmem_desc* d) { ((struct fd_ref*)(void*)&d->part[mscclppTransportSHM])->key ^= 1; }
static void edit_bigger(struct regmem_desc* d) {
  d->alloc_size += 1 << 20;
  d->size += 1 << 20;
}

/* Rank 1 imports rank 0's blob intact, then corrupted, truncated and forged copies of it. */
static void check_blobs(mscclppComm_t comm, const unsigned char* blob) {
  mscclppRegMem_t m = NULL;
  unsigned char bad[MSCCLPP_REGMEM_BLOB_BYTES];
  CHECK_OK(mscclppRegMemDeserialize(comm, blob, regblob_bytes(), &m));
  void* ptr = NULL;
  size_t size = 0;
  int owner = -1;
  CHECK_OK(mscclppRegMemInfo(m, &ptr, &size, &owner));
  CHECK(ptr != NULL && size == BYTES && owner == 0);
  CHECK(((unsigned char*)ptr)[BYTES - 1] == 0x42); /* mapped: rank 0's byte */
  size_t cap = sizeof(bad);
  CHECK_RES(mscclppRegMemSerialize(m, bad, &cap), mscclppInvalidUsage); /* only the owner serializes */
  CHECK_OK(mscclppRegMemRelease(m));
  memcpy(bad, blob, regblob_bytes());
  bad[100] ^= 0x10;
  CHECK_RES(mscclppRegMemDeserialize(comm, bad, regblob_bytes(), &m), mscclppInvalidArgument);
  CHECK_ERR_MENTIONS("checksum");
  CHECK_RES(mscclppRegMemDeserialize(comm, blob, 100, &m), mscclppInvalidArgument);
  CHECK_ERR_MENTIONS("truncated");
  memcpy(bad, blob, regblob_bytes());
  bad[1] ^= 0xff;
  CHECK_RES(mscclppRegMemDeserialize(comm, bad, regblob_bytes(), &m), mscclppInvalidArgument);
  CHECK_ERR_MENTIONS("magic");
  struct {
    void (*edit)(struct regmem_desc*);
    mscclppResult_t res;
    const char* says;
  } forged[] = {{edit_pid, mscclppInvalidArgument, "claims"},   {edit_host, mscclppInvalidArgument, "claims"},
                {edit_comm, mscclppInvalidArgument, "communicator"}, {edit_owner, mscclppInvalidUsage, "own memory"},
                {edit_key, mscclppRemoteError, "wrong key"},     {edit_bigger, mscclppRemoteError, "exported"}};
  for (size_t i = 0; i < sizeof(forged) / sizeof(forged[0]); i++) {
    forge(blob, bad, forged[i].edit);
    CHECK_RES(mscclppRegMemDeserialize(comm, bad, regblob_bytes(), &m), forged[i].res);
    CHECK_ERR_MENTIONS(forged[i].says);
  }
}

static void test_blobs(mscclppComm_t comm, int rank) {
  unsigned char blob[MSCCLPP_REGMEM_BLOB_BYTES] = {0};
  if (rank == 0) {
    unsigned char* buf = NULL;
    CHECK_OK(mscclppMemAlloc((void**)&buf, BYTES, mscclppMemHost));
    buf[BYTES - 1] = 0x42;
    mscclppRegMem_t m;
    CHECK_OK(mscclppRegisterMemory(comm, buf, BYTES, &m));
    size_t len = 10;
    CHECK_RES(mscclppRegMemSerialize(m, blob, &len), mscclppInvalidArgument);
    CHECK(len > 10 && len <= MSCCLPP_REGMEM_BLOB_BYTES);
    CHECK_OK(mscclppRegMemSerialize(m, blob, &len));
    mscclppRegMem_t self;
    CHECK_RES(mscclppRegMemDeserialize(comm, blob, len, &self), mscclppInvalidUsage); /* its own */
    CHECK_OK(mscclppBootstrapSend(comm, 1, TAG_BLOB, blob, sizeof(blob)));
    CHECK_OK(mscclppBootstrapBarrier(comm));
    CHECK_OK(mscclppRegMemRelease(m));
    CHECK_OK(mscclppMemFree(buf));
  } else {
    CHECK_OK(mscclppBootstrapRecv(comm, 0, TAG_BLOB, blob, sizeof(blob)));
    check_blobs(comm, blob);
    CHECK_OK(mscclppBootstrapBarrier(comm));
  }
}

int main(void) {
  int rank, n;
  mscclppComm_t comm = tmp_init(&rank, &n);
  if (n != 2) TEST_FAIL("needs exactly 2 ranks");
  test_connect_errors(comm, rank);
  test_write_errors(comm, rank);
  test_blobs(comm, rank);
  CHECK_OK(mscclppCommDestroy(comm));
  return 0;
}
