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

static mscclppResult_t shm_export(struct mscclppRegMem* mem, const struct mem_info* info) {
  if (info->kind != MEM_KIND_HOST_SHM) return mscclppSuccess;
  int fd = dup(info->fd);
  if (fd < 0) return MPP_ERRNO(mscclppSystemError, errno, "shm: dup of the memfd of %p", mem->ptr);
  /* fd_service_add owns fd from here on, also when it fails. */
  MPP_CHECK(fd_service_add(mem->comm->tstate->fds, fd, info->alloc_size, &mem->d.fd_id, &mem->d.fd_key));
  mem->d.transports |= TRANSPORT_BIT(mscclppTransportSHM);
  return mscclppSuccess;
}

static void shm_unexport(struct mscclppRegMem* mem) { fd_service_remove(mem->comm->tstate->fds, mem->d.fd_id); }

/* Maps [alloc_offset, alloc_offset+size) of the owner's memfd (page-aligned around it). */
static mscclppResult_t map_range(struct mscclppRegMem* mem, int fd) {
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

static mscclppResult_t shm_import(struct mscclppRegMem* mem) {
  struct mscclppComm* comm = mem->comm;
  const struct regmem_desc* d = &mem->d;
  if (!same_host(comm, d->owner)) return mscclppSuccess;
  int fd = -1;
  uint64_t exported = 0;
  MPP_CHECK(fd_fetch(comm->comm_id, comm->rank, d->owner, d->fd_id, d->fd_key, comm->timeout_ms, &fd, &exported));
  mscclppResult_t res = mscclppSuccess;
  if (exported != d->alloc_size)
    res = MPP_ERR(mscclppRemoteError, "shm: rank %d exported %llu bytes, its blob claims %llu", d->owner,
                  (unsigned long long)exported, (unsigned long long)d->alloc_size);
  else
    res = map_range(mem, fd);
  close(fd);
  return res;
}

static void shm_unimport(struct mscclppRegMem* mem) {
  if (mem->map_base != NULL) munmap(mem->map_base, mem->map_len);
  mem->map_base = NULL;
  mem->ptr = NULL;
}

static mscclppResult_t shm_connect(struct mscclppConnection* conn) {
  (void)conn;
  return mscclppSuccess;
}

static mscclppResult_t shm_write(struct mscclppConnection* conn, struct mscclppRegMem* dst, uint64_t dst_off,
                                 struct mscclppRegMem* src, uint64_t src_off, uint64_t size) {
  (void)conn;
  return mem_copy((char*)dst->ptr + dst_off, dst->is_device ? dst->d.cuda_dev : -1, (char*)src->ptr + src_off,
                  src->is_device ? src->d.cuda_dev : -1, size);
}

static mscclppResult_t shm_update(struct mscclppConnection* conn, struct mscclppRegMem* dst, uint64_t dst_off,
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

static mscclppResult_t shm_flush(struct mscclppConnection* conn, int64_t timeout_ms) {
  (void)conn;
  (void)timeout_ms;
  /* Full fence: every store of this thread to the peer's memory is globally visible before any
   * later load or store of this thread (e.g. a flag the peer polls without acquire order). */
  atomic_thread_fence(memory_order_seq_cst);
  return mscclppSuccess;
}

static void shm_close(struct mscclppConnection* conn, int abort) {
  (void)conn;
  (void)abort;
}

const struct transport_ops shm_transport = {
    .name = "shm",
    .id = mscclppTransportSHM,
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
