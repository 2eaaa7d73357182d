/* tcp_regions.h - the tcp transport's table of local registered regions, which its receiving
 * threads write into and read from on a peer's behalf (tcp_regions.c). One table per communicator,
 * in the tcp transport's state slot. */
#ifndef MPP_TRANSPORT_TCP_REGIONS_H_
#define MPP_TRANSPORT_TCP_REGIONS_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <mscclpp/core.h>

struct region_entry;

/* A table of local registered regions by id. Ids start at 1 and are never reused, so a stale id
 * from a released registration never reaches newer memory. Thread-safe. */
struct region_table {
  pthread_mutex_t lock;
  struct region_entry* entries;
  size_t count, cap;
  uint64_t next_id;
};

void region_table_init(struct region_table* t);
void region_table_fini(struct region_table* t);
/* Adds [ptr, ptr+size) (GPU memory of device when device >= 0) and returns its id. */
mscclppResult_t region_add(struct region_table* t, void* ptr, uint64_t size, int device, uint64_t* id);
/* Removes id; later writes to it fail. Unknown ids are ignored. */
void region_remove(struct region_table* t, uint64_t id);
/* Copies size bytes of data to offset of region id: InvalidArgument when the region does not exist
 * or [offset, offset+size) leaves it. Holds the table's lock while copying so that the region
 * cannot be removed in between. Host memory is written in whole 64-bit words where alignment
 * allows, so a local reader polling a word (LL packets) never sees it torn. */
mscclppResult_t region_write(struct region_table* t, uint64_t id, uint64_t offset, const void* data, uint64_t size);
/* Copies size bytes at offset of region id into data (host memory), checked as region_write. */
mscclppResult_t region_read(struct region_table* t, uint64_t id, uint64_t offset, void* data, uint64_t size);
/* Success when region id exists and holds [offset, offset+size); the error region_write would give otherwise. */
mscclppResult_t region_check(struct region_table* t, uint64_t id, uint64_t offset, uint64_t size);
/* Stores value as one 64-bit word at offset (8-byte aligned) of region id with release order: a
 * thread of this process that reads the word with acquire order also sees every earlier
 * region_write of the calling thread. */
mscclppResult_t region_store64(struct region_table* t, uint64_t id, uint64_t offset, uint64_t value);

#endif /* MPP_TRANSPORT_TCP_REGIONS_H_ */
