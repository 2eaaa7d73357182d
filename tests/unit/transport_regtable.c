/* The region table the tcp receiver writes through: bounds, alignment, unknown and released ids. */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "transport/tcp_regions.h"
#include "helpers.h"

int main(void) {
  struct region_table t;
  region_table_init(&t);
  _Alignas(8) unsigned char buf[64] = {0};
  unsigned char data[64];
  for (int i = 0; i < 64; i++) data[i] = (unsigned char)(i + 1);
  uint64_t id = 0, id2 = 0;
  CHECK_OK(region_add(&t, buf, sizeof(buf), -1, &id));
  CHECK(id != 0);

  CHECK_OK(region_write(&t, id, 0, data, 64));
  CHECK(memcmp(buf, data, 64) == 0);
  CHECK_OK(region_write(&t, id, 60, data, 4));
  CHECK(memcmp(buf + 60, data, 4) == 0);
  CHECK_OK(region_write(&t, id, 64, data, 0)); /* empty write at the end is in bounds */
  CHECK_RES(region_write(&t, id, 60, data, 5), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "offset 60") != NULL);
  CHECK_RES(region_write(&t, id, 65, data, 0), mscclppInvalidArgument);
  CHECK_RES(region_write(&t, id, UINT64_MAX - 2, data, 8), mscclppInvalidArgument); /* would wrap */
  CHECK_RES(region_write(&t, id, 8, data, UINT64_MAX), mscclppInvalidArgument);
  CHECK_RES(region_write(&t, id + 100, 0, data, 1), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "not registered") != NULL);

  CHECK_OK(region_store64(&t, id, 56, 0x1122334455667788ull));
  uint64_t word;
  memcpy(&word, buf + 56, 8);
  CHECK(word == 0x1122334455667788ull);
  CHECK_RES(region_store64(&t, id, 4, 1), mscclppInvalidArgument);  /* unaligned */
  CHECK_RES(region_store64(&t, id, 64, 1), mscclppInvalidArgument); /* past the end */
  CHECK_RES(region_store64(&t, id, UINT64_MAX - 7, 1), mscclppInvalidArgument);

  /* A region whose address is not 8-byte aligned refuses 64-bit updates. */
  CHECK_OK(region_add(&t, buf + 1, 32, -1, &id2));
  CHECK(id2 != id);
  CHECK_RES(region_store64(&t, id2, 8, 1), mscclppInvalidArgument);
  CHECK_OK(region_write(&t, id2, 0, data, 32));

  /* Released ids stay dead; new regions never reuse them. */
  region_remove(&t, id);
  CHECK_RES(region_write(&t, id, 0, data, 1), mscclppInvalidArgument);
  CHECK_RES(region_store64(&t, id, 0, 1), mscclppInvalidArgument);
  uint64_t ids[40];
  for (int i = 0; i < 40; i++) {
    CHECK_OK(region_add(&t, buf, 8, -1, &ids[i]));
    CHECK(ids[i] != id && ids[i] != id2);
  }
  for (int i = 0; i < 40; i++) CHECK_OK(region_write(&t, ids[i], 0, data, 8));
  for (int i = 0; i < 40; i++) region_remove(&t, ids[i]);
  region_remove(&t, 12345); /* unknown: ignored */
  region_table_fini(&t);
  printf("transport_regtable: OK\n");
  return 0;
}
