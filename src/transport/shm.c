/* shm.c - the shared-memory transport between processes of one host. Memory from
 * mscclppMemAlloc(mscclppMemHost) is a memfd: registration exports the fd through the fd service,
 * import fetches it and maps the registered range. Writes are memcpy into the mapping, updates are
 * release stores of one 64-bit word, flush is a full fence. */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transport/fdpass.h"
#include "transport/transport.h"
#include "util/err.h"
#include "util/log.h"

/* What shm adds to a buffer's description: the memfd's export in the owner's fd service. */
_Static_assert(sizeof(struct fd_ref) <= TRANSPORT_PART_BYTES, "shm's part must fit");
static struct fd_ref* shm_part(struct regmem_desc* d) { return (struct fd_ref*)(void*)&d->part[mscclppTransportSHM]; }

static mscclppResult_t shm_export(struct transport_mem* mem, const struct mem_info* info) {
  if (info->kind != MEM_KIND_HOST_SHM) return mscclppSuccess;
  int fd = dup(info->fd);
  if (fd < 0) return MPP_ERRNO(mscclppSystemError, errno, "shm: dup of the memfd of %p", mem->ptr);
  /* fd_service_add owns fd from here on, also when it fails. */
  MPP_CHECK(fd_service_add(mem->tc->fds, fd, info->alloc_size, &shm_part(&mem->d)->id, &shm_part(&mem->d)->key));
  mem->d.transports |= TRANSPORT_BIT(mscclppTransportSHM);
  return mscclppSuccess;
}

static void shm_unexport(struct transport_mem* mem) { fd_service_remove(mem->tc->fds, shm_part(&mem->d)->id); }

/* Maps [alloc_offset, alloc_offset+size) of the owner's memfd (page-aligned around it). */
static mscclppResult_t map_range(struct transport_mem* mem, int fd) {
  const struct regmem_desc* d = &mem->d;
  struct stat st;
  if (fstat(fd, &st) != 0) return MPP_ERRNO(mscclppSystemError, errno, "shm: fstat of rank %d's memfd", d->owner);
  if ((uint64_t)st.st_size < d->alloc_size)
    return MPP_ERR(mscclppRemoteError, "shm: rank %d's memfd has %lld bytes, its blob claims %llu", d->owner,
                   (long long)st.st_size, (unsigned long long)d->alloc_size);
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  uint64_t start = d->alloc_offset / page * page;
  size_t len = (size_t)(d->alloc_offset + d->size - start);
  void* base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)start);
  if (base == MAP_FAILED)
    return MPP_ERRNO(mscclppSystemError, errno, "shm: mmap of %zu bytes of rank %d's memory", len, d->owner);
  mem->map_base = base;
  mem->map_len = len;
  mem->ptr = (char*)base + (d->alloc_offset - start);
  return mscclppSuccess;
}

static mscclppResult_t shm_import(struct transport_mem* mem) {
  struct transport_comm* tc = mem->tc;
  struct regmem_desc* d = &mem->d;
  if (!transport_same_host(tc, d->owner)) return mscclppSuccess;
  int fd = -1;
  uint64_t exported = 0;
  MPP_CHECK(fd_fetch(fd_service_key(tc->fds), tc->rank, d->owner, shm_part(d)->id, shm_part(d)->key, tc->timeout_ms, &fd, &exported));
  mscclppResult_t res = mscclppSuccess;
  if (exported != d->alloc_size)
    res = MPP_ERR(mscclppRemoteError, "shm: rank %d exported %llu bytes, its blob claims %llu", d->owner,
                  (unsigned long long)exported, (unsigned long long)d->alloc_size);
  else
    res = map_range(mem, fd);
  close(fd);
  return res;
}

static void shm_unimport(struct transport_mem* mem) {
  if (mem->map_base != NULL) munmap(mem->map_base, mem->map_len);
  mem->map_base = NULL;
  mem->ptr = NULL;
}

static mscclppResult_t shm_connect(struct transport_conn* conn) {
  (void)conn;
  return mscclppSuccess;
}

static mscclppResult_t shm_write(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                 struct transport_mem* src, uint64_t src_off, uint64_t size) {
  (void)conn;
  return mem_copy((char*)dst->ptr + dst_off, dst->is_device ? dst->d.cuda_dev : -1, (char*)src->ptr + src_off,
                  src->is_device ? src->d.cuda_dev : -1, size);
}

static mscclppResult_t shm_update(struct transport_conn* conn, struct transport_mem* dst, uint64_t dst_off,
                                  uint64_t new_value) {
  (void)conn;
  char* to = (char*)dst->ptr + dst_off;
  /* GPU memory mapped here (a P2P import): cudaMemcpy is synchronous, after the earlier copies. */
  if (dst->is_device) return mem_copy(to, dst->d.cuda_dev, &new_value, -1, sizeof(new_value));
  /* Release: the peer that acquire-loads this word also sees every earlier write of this thread
   * to its memory (the memcpy of shm_write, or the completed cudaMemcpy). */
  atomic_store_explicit((_Atomic uint64_t*)(void*)to, new_value, memory_order_release);
  return mscclppSuccess;
}

static mscclppResult_t shm_flush(struct transport_conn* conn, int64_t timeout_ms) {
  (void)conn;
  (void)timeout_ms;
  /* Full fence: every store of this thread to the peer's memory is globally visible before any
   * later load or store of this thread (e.g. a flag the peer polls without acquire order). */
  atomic_thread_fence(memory_order_seq_cst);
  return mscclppSuccess;
}

static void shm_close(struct transport_conn* conn, int abort) {
  (void)conn;
  (void)abort;
}

static const char* shm_unusable(const struct transport_comm* tc, int peer) {
  return transport_same_host(tc, peer) ? NULL : "the two ranks are on different hosts";
}

static void shm_encode_part(const union transport_part* part, uint8_t* out) {
  fd_ref_encode((const struct fd_ref*)(const void*)part, out);
}

static mscclppResult_t shm_decode_part(const uint8_t* in, const struct regmem_desc* d, union transport_part* part) {
  (void)d;
  fd_ref_decode(in, (struct fd_ref*)(void*)part);
  return mscclppSuccess;
}

const struct transport_ops shm_transport = {
    .name = "shm",
    .api_name = "shm",
    .id = mscclppTransportSHM,
    .mem_kinds = 1u << MEM_KIND_HOST_SHM,
    .token_import = TRANSPORT_BIT(mscclppTransportSHM),
    .maps_memory = 1,
    .unreachable_why = "it is not shared memory (plain host memory is reachable over tcp only); allocate it with "
                       "mscclppMemAlloc(mscclppMemHost)",
    .part_wire_bytes = FD_REF_WIRE_BYTES,
    .unusable = shm_unusable,
    .encode_part = shm_encode_part,
    .decode_part = shm_decode_part,
    .export_mem = shm_export,
    .unexport_mem = shm_unexport,
    .import_mem = shm_import,
    .unimport_mem = shm_unimport,
    .connect = shm_connect,
    .write = shm_write,
    .update_and_sync = shm_update,
    .flush = shm_flush,
    .status = NULL,
    .close = shm_close,
};
