/* Registered-memory blobs: the transport rows' parts fill the blob, encode/decode round trip (the
 * common fields and each offered transport's part), and every kind of corrupted or inconsistent
 * blob refused with a message naming the field. */
#include <stdint.h>
#include <string.h>

#include "transport/fdpass.h"
#include "transport/transport.h"
#include "helpers.h"

#define COMM_ID 0x1122334455667788ull
#define NRANKS 4

/* The tcp part's region id (its only field) and the shm part's export (struct fd_ref). */
static uint64_t* region_id(struct regmem_desc* d) { return &d->part[mscclppTransportTCP].align; }
static struct fd_ref* shm_ref(struct regmem_desc* d) { return (struct fd_ref*)(void*)&d->part[mscclppTransportSHM]; }

static struct regmem_desc valid_desc(void) {
  struct regmem_desc d = {.comm_id = COMM_ID, .owner = 2, .pid = 1234, .host_hash = 0xabcdefull,
                          .transports = TRANSPORT_BIT(mscclppTransportSHM) | TRANSPORT_BIT(mscclppTransportTCP),
                          .kind = MEM_KIND_HOST_SHM, .cuda_dev = -1, .size = 1000, .alloc_size = 4096,
                          .alloc_offset = 96};
  *region_id(&d) = 7;
  *shm_ref(&d) = (struct fd_ref){.id = 3, .key = 0xfeedfacecafebeefull};
  /* cuda-ipc's part: an fd export (16 bytes) then the IPC handle (64). */
  for (int i = 0; i < 80; i++) d.part[mscclppTransportP2P].bytes[i] = (uint8_t)(i * 7);
  return d;
}

/* The rows' parts exactly fill the blob between the common fields and the checksum. */
static void test_rows(void) {
  CHECK_OK(regblob_check_rows());
  int n = 0;
  const struct transport_ops* const* rows = transport_rows(&n);
  size_t bytes = 0;
  for (int i = 0; i < n; i++) bytes += rows[i]->part_wire_bytes;
  CHECK(72 + bytes + 8 == regblob_bytes() && regblob_bytes() <= MSCCLPP_REGMEM_BLOB_BYTES);
}

/* Decoding must fail with InvalidArgument and a message containing `what`. */
static void expect_refused(const uint8_t* blob, size_t len, uint64_t comm_id, const char* what) {
  struct regmem_desc out;
  CHECK_RES(regblob_decode(blob, len, comm_id, NRANKS, &out), mscclppInvalidArgument);
  CHECK_MSG(strstr(mscclppGetLastError(), what) != NULL, "expected '%s' in: %s", what, mscclppGetLastError());
}

static void expect_desc_refused(struct regmem_desc d, const char* what) {
  uint8_t blob[MSCCLPP_REGMEM_BLOB_BYTES];
  regblob_encode(&d, blob);
  expect_refused(blob, sizeof(blob), COMM_ID, what);
}

static void test_round_trip(void) {
  struct regmem_desc d = valid_desc(), out;
  uint8_t blob[MSCCLPP_REGMEM_BLOB_BYTES] = {0};
  regblob_encode(&d, blob);
  CHECK_OK(regblob_decode(blob, regblob_bytes(), COMM_ID, NRANKS, &out));
  CHECK(out.comm_id == d.comm_id && out.owner == d.owner && out.pid == d.pid && out.size == d.size &&
        out.alloc_offset == d.alloc_offset);
  CHECK(out.host_hash == d.host_hash && out.transports == d.transports && out.kind == d.kind);
  CHECK(out.alloc_size == d.alloc_size && *region_id(&out) == 7 && shm_ref(&out)->id == 3 &&
        shm_ref(&out)->key == shm_ref(&d)->key);
  CHECK(out.cuda_dev == -1);
  for (int i = 0; i < 80; i++) CHECK(out.part[mscclppTransportP2P].bytes[i] == 0); /* not offered: not carried */
  /* A larger buffer (an allgather slot) holding the blob is fine. */
  CHECK_OK(regblob_decode(blob, sizeof(blob), COMM_ID, NRANKS, &out));
  /* Plain host and device kinds round-trip too. */
  struct regmem_desc h = valid_desc();
  h.kind = MEM_KIND_HOST;
  h.transports = TRANSPORT_BIT(mscclppTransportTCP);
  h.alloc_size = h.size;
  h.alloc_offset = 0;
  regblob_encode(&h, blob);
  CHECK_OK(regblob_decode(blob, regblob_bytes(), COMM_ID, NRANKS, &out));
  struct regmem_desc g = valid_desc();
  g.kind = MEM_KIND_CUDA_IPC;
  g.cuda_dev = 1;
  g.transports = TRANSPORT_BIT(mscclppTransportP2P) | TRANSPORT_BIT(mscclppTransportTCP);
  regblob_encode(&g, blob);
  CHECK_OK(regblob_decode(blob, regblob_bytes(), COMM_ID, NRANKS, &out));
  CHECK(out.cuda_dev == 1 && out.kind == MEM_KIND_CUDA_IPC);
  CHECK(memcmp(out.part[mscclppTransportP2P].bytes, g.part[mscclppTransportP2P].bytes, 80) == 0);
}

static void test_envelope(void) {
  struct regmem_desc d = valid_desc();
  uint8_t blob[MSCCLPP_REGMEM_BLOB_BYTES], bad[MSCCLPP_REGMEM_BLOB_BYTES];
  regblob_encode(&d, blob);
  memcpy(bad, blob, sizeof(bad));
  bad[0] ^= 0xff;
  expect_refused(bad, sizeof(bad), COMM_ID, "magic");
  memcpy(bad, blob, sizeof(bad));
  bad[4] = 9;
  expect_refused(bad, sizeof(bad), COMM_ID, "version");
  expect_refused(blob, regblob_bytes() - 1, COMM_ID, "truncated");
  expect_refused(blob, 4, COMM_ID, "truncated");
  expect_refused(blob, 0, COMM_ID, "truncated");
  memcpy(bad, blob, sizeof(bad));
  bad[50] ^= 0x01; /* one bit of the size */
  expect_refused(bad, sizeof(bad), COMM_ID, "checksum");
  memcpy(bad, blob, sizeof(bad));
  bad[6] = 0x10; /* declared length */
  expect_refused(bad, sizeof(bad), COMM_ID, "header says");
  expect_refused(blob, sizeof(blob), COMM_ID + 1, "communicator");
  struct regmem_desc out;
  CHECK_RES(regblob_decode(NULL, 10, COMM_ID, NRANKS, &out), mscclppInvalidArgument);
}

static void test_fields(void) {
  struct regmem_desc d;
  d = valid_desc(), d.owner = NRANKS, expect_desc_refused(d, "owner rank");
  d = valid_desc(), d.owner = -1, expect_desc_refused(d, "owner rank");
  d = valid_desc(), d.pid = 0, expect_desc_refused(d, "pid");
  d = valid_desc(), d.kind = MEM_KIND_COUNT, expect_desc_refused(d, "memory kind");
  d = valid_desc(), d.kind = -3, expect_desc_refused(d, "memory kind");
  d = valid_desc(), d.kind = MEM_KIND_HOST, expect_desc_refused(d, "transports"); /* shm on plain host memory */
  d = valid_desc(), d.transports = 0, expect_desc_refused(d, "transports");
  d = valid_desc(), d.transports |= 1u << 9, expect_desc_refused(d, "transports");
  d = valid_desc(), d.transports |= TRANSPORT_BIT(mscclppTransportP2P), expect_desc_refused(d, "transports");
  d = valid_desc(), d.cuda_dev = 0, expect_desc_refused(d, "cuda device");
  d = valid_desc(), d.size = 0, expect_desc_refused(d, "size");
  d = valid_desc(), d.size = 1ull << 60, expect_desc_refused(d, "size");
  d = valid_desc(), d.size = 4001, expect_desc_refused(d, "size overflow"); /* 96 + 4001 > 4096 */
  d = valid_desc(), d.alloc_offset = 4097, expect_desc_refused(d, "size overflow");
  d = valid_desc(), d.alloc_offset = UINT64_MAX - 10, expect_desc_refused(d, "size overflow");
  d = valid_desc(), d.alloc_size = UINT64_MAX, d.alloc_offset = UINT64_MAX - 8, expect_desc_refused(d, "size overflow");
  d = valid_desc(), *region_id(&d) = 0, expect_desc_refused(d, "region id");
}

/* Random field values with a valid checksum: decode never crashes, and what it accepts obeys the
 * invariants the transports rely on. */
static void test_random(void) {
  uint64_t x = 88172645463325252ull;
  for (int iter = 0; iter < 20000; iter++) {
    struct regmem_desc d = valid_desc(), out;
    uint64_t* words[] = {&d.size, &d.alloc_size, &d.alloc_offset, region_id(&d)};
    for (int k = 0; k < 4; k++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      if (x & 1) *words[k] = x >> (x % 64);
    }
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    if (x & 2) d.owner = (int32_t)(x >> 40) % 8 - 2;
    if (x & 4) d.kind = (int32_t)((x >> 20) % 6) - 1;
    if (x & 8) d.transports = (uint32_t)(x >> 50);
    uint8_t blob[MSCCLPP_REGMEM_BLOB_BYTES];
    regblob_encode(&d, blob);
    if (regblob_decode(blob, sizeof(blob), COMM_ID, NRANKS, &out) != mscclppSuccess) continue;
    CHECK(out.owner >= 0 && out.owner < NRANKS && out.size > 0);
    if (out.kind != MEM_KIND_HOST) CHECK(out.alloc_offset <= out.alloc_size && out.size <= out.alloc_size - out.alloc_offset);
  }
}

int main(void) {
  test_rows();
  test_round_trip();
  test_envelope();
  test_fields();
  test_random();
  printf("transport_blob: OK\n");
  return 0;
}
