/* regmem.c - registered memory handles: registering local buffers (every transport exports what
 * it can reach), serializing them, importing peers' blobs (every offered transport this rank can
 * use maps them) and the collective mscclppRegisterBuffer. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/handle_reg.h"
#include "core/regmem.h"
#include "transport/transport.h"
#include "util/err.h"
#include "util/log.h"

/* Undoes the exports or imports of mem's transports and frees it (not tracked). */
static void regmem_destroy(struct mscclppRegMem* mem) {
  int nrows;
  const struct transport_ops* const* rows = transport_rows(&nrows);
  for (int i = 0; i < nrows; i++) {
    if (!(mem->t.d.transports & TRANSPORT_BIT(rows[i]->id))) continue;
    if (mem->t.local)
      rows[i]->unexport_mem(&mem->t);
    else
      rows[i]->unimport_mem(&mem->t);
  }
  free(mem);
}

void regmem_free(struct mscclppRegMem* mem) {
  if (mem == NULL) return;
  handle_remove(HANDLE_REGMEM, mem);
  comm_objects_untrack(mem->comm, &mem->link);
  regmem_destroy(mem);
}

mscclppResult_t regmem_register(struct mscclppComm* comm, void* ptr, uint64_t size, struct mscclppRegMem** out) {
  struct mem_info info;
  MPP_CHECK(mem_classify(ptr, size, &info));
  struct mscclppRegMem* m = calloc(1, sizeof(*m));
  if (m == NULL) return MPP_ERR(mscclppSystemError, "registering %llu bytes: out of host memory", (unsigned long long)size);
  list_init(&m->link);
  m->comm = comm;
  m->t.tc = &comm->tc;
  m->t.local = 1;
  m->t.ptr = ptr;
  m->t.is_device = mem_kind_is_device(info.kind);
  m->t.d = (struct regmem_desc){.comm_id = comm->comm_id, .owner = comm->rank, .pid = (int32_t)getpid(),
                              .host_hash = comm->peers[comm->rank].host_hash, .kind = (int32_t)info.kind,
                              .cuda_dev = m->t.is_device ? info.device : -1, .size = size,
                              .alloc_size = info.alloc_size,
                              .alloc_offset = (uint64_t)((uintptr_t)ptr - (uintptr_t)info.base)};
  int nrows;
  const struct transport_ops* const* rows = transport_rows(&nrows);
  for (int i = 0; i <= nrows; i++) {
    mscclppResult_t res = i < nrows ? rows[i]->export_mem(&m->t, &info) : handle_add(HANDLE_REGMEM, m, comm);
    if (res != mscclppSuccess) {
      regmem_destroy(m); /* unexports exactly the transports whose bit is set */
      return res;
    }
  }
  comm_objects_track(comm, COMM_OBJ_MEMS, &m->link);
  LOG_DEBUG_(LOG_SUB_MEM, "registered %p, %llu bytes, kind %d, transports 0x%x", ptr, (unsigned long long)size,
             info.kind, m->t.d.transports);
  *out = m;
  return mscclppSuccess;
}

/* Cross-checks a decoded blob against what the communicator knows about its owner. */
static mscclppResult_t check_owner(struct mscclppComm* comm, const struct regmem_desc* d) {
  if (d->owner == comm->rank)
    return MPP_ERR(mscclppInvalidUsage, "registered-memory blob describes this rank's (%d) own memory; use the local handle",
                   comm->rank);
  const struct peer_info* p = &comm->peers[d->owner];
  if (d->host_hash != p->host_hash || d->pid != p->pid)
    return MPP_ERR(mscclppInvalidArgument,
                   "registered-memory blob claims rank %d is pid %d on host %016llx, but it is pid %d on host %016llx",
                   d->owner, d->pid, (unsigned long long)d->host_hash, p->pid, (unsigned long long)p->host_hash);
  return mscclppSuccess;
}

mscclppResult_t regmem_import(struct mscclppComm* comm, const void* blob, size_t len, uint32_t want,
                              struct mscclppRegMem** out) {
  struct regmem_desc d;
  MPP_CHECK(regblob_decode(blob, len, comm->comm_id, comm->nranks, &d));
  MPP_CHECK(check_owner(comm, &d));
  struct mscclppRegMem* m = calloc(1, sizeof(*m));
  if (m == NULL) return MPP_ERR(mscclppSystemError, "importing rank %d's memory: out of host memory", d.owner);
  list_init(&m->link);
  m->comm = comm;
  m->t.tc = &comm->tc;
  m->t.d = d;
  m->t.d.transports = 0; /* set again as each import succeeds, so that a failure undoes only those */
  int nrows;
  const struct transport_ops* const* rows = transport_rows(&nrows);
  for (int i = 0; i < nrows; i++) {
    if (!(d.transports & want & TRANSPORT_BIT(rows[i]->id))) continue;
    mscclppResult_t res = rows[i]->import_mem(&m->t);
    if (res != mscclppSuccess) {
      regmem_destroy(m);
      return res;
    }
    m->t.d.transports |= TRANSPORT_BIT(rows[i]->id);
  }
  mscclppResult_t res = handle_add(HANDLE_REGMEM, m, comm);
  if (res != mscclppSuccess) {
    regmem_destroy(m);
    return res;
  }
  comm_objects_track(comm, COMM_OBJ_MEMS, &m->link);
  *out = m;
  return mscclppSuccess;
}

mscclppResult_t mscclppRegisterMemory(mscclppComm_t comm, void* ptr, size_t size, mscclppRegMem_t* mem) {
  err_clear();
  COMM_CHECK(comm);
  MPP_CHECK_ARG(ptr != NULL && mem != NULL, "mscclppRegisterMemory: ptr or mem is NULL");
  MPP_CHECK_ARG(size > 0 && size <= (1ull << 48), "mscclppRegisterMemory: size %zu out of range (1 .. 2^48)", size);
  return regmem_register(comm, ptr, size, mem);
}

mscclppResult_t mscclppRegMemSerialize(mscclppRegMem_t mem, void* blob, size_t* blobSize) {
  err_clear();
  MPP_CHECK_ARG(blob != NULL && blobSize != NULL, "mscclppRegMemSerialize: blob or blobSize is NULL");
  HANDLE_CHECK(HANDLE_REGMEM, mem);
  if (!mem->t.local)
    return MPP_ERR(mscclppInvalidUsage, "mscclppRegMemSerialize: the memory is rank %d's import; only the owner serializes it",
                   mem->t.d.owner);
  size_t need = regblob_bytes();
  if (*blobSize < need) {
    size_t given = *blobSize;
    *blobSize = need;
    return MPP_ERR(mscclppInvalidArgument, "mscclppRegMemSerialize: blob capacity %zu < %zu bytes", given, need);
  }
  regblob_encode(&mem->t.d, blob);
  *blobSize = need;
  return mscclppSuccess;
}

mscclppResult_t mscclppRegMemDeserialize(mscclppComm_t comm, const void* blob, size_t blobSize, mscclppRegMem_t* mem) {
  err_clear();
  COMM_CHECK(comm);
  MPP_CHECK_ARG(blob != NULL && mem != NULL, "mscclppRegMemDeserialize: blob or mem is NULL");
  return regmem_import(comm, blob, blobSize, REGMEM_ALL, mem);
}

mscclppResult_t mscclppRegMemInfo(mscclppRegMem_t mem, void** ptr, size_t* size, int* ownerRank) {
  err_clear();
  HANDLE_CHECK(HANDLE_REGMEM, mem);
  if (ptr) *ptr = mem->t.ptr;
  if (size) *size = (size_t)mem->t.d.size;
  if (ownerRank) *ownerRank = mem->t.d.owner;
  return mscclppSuccess;
}

mscclppResult_t mscclppRegMemRelease(mscclppRegMem_t mem) {
  err_clear();
  MPP_CHECK(handle_retire(HANDLE_REGMEM, mem, __func__)); /* refused while another thread's call uses it */
  regmem_free(mem);
  return mscclppSuccess;
}

/* Imports every peer's slot of the allgathered blobs into remote[]; a slot whose magic is 0 means
 * that rank failed to register. */
static mscclppResult_t import_all(struct mscclppComm* comm, const uint8_t* slots, mscclppRegMem_t* remote) {
  for (int r = 0; r < comm->nranks; r++) {
    if (r == comm->rank) continue;
    const uint8_t* slot = slots + (size_t)r * MSCCLPP_REGMEM_BLOB_BYTES;
    static const uint8_t zero[4];
    if (memcmp(slot, zero, sizeof(zero)) == 0)
      return MPP_ERR(mscclppRemoteError, "mscclppRegisterBuffer: rank %d failed to register its buffer", r);
    MPP_CHECK(regmem_import(comm, slot, MSCCLPP_REGMEM_BLOB_BYTES, REGMEM_ALL, &remote[r]));
  }
  return mscclppSuccess;
}

/* The second allgather of mscclppRegisterBuffer: every rank's outcome, so that all ranks return
 * together (none releases its buffer while a peer still imports it) and a failure anywhere fails
 * everyone. scratch holds at least nranks int32s. */
static mscclppResult_t agree_all(struct mscclppComm* comm, mscclppResult_t mine, int32_t* scratch) {
  scratch[comm->rank] = (int32_t)mine;
  MPP_CHECK(bootstrap_allgather(comm->boot, scratch, sizeof(int32_t)));
  if (mine != mscclppSuccess) return mine;
  for (int r = 0; r < comm->nranks; r++)
    if (scratch[r] != mscclppSuccess)
      return MPP_ERR(mscclppRemoteError, "mscclppRegisterBuffer: rank %d failed to register or import (%s; see its log)", r,
                     mscclppGetErrorString((mscclppResult_t)scratch[r]));
  return mscclppSuccess;
}

mscclppResult_t mscclppRegisterBuffer(mscclppComm_t comm, void* local_memory, size_t size, mscclppRegisteredMemory* regMem) {
  err_clear();
  COMM_CHECK(comm);
  MPP_CHECK_ARG(regMem != NULL, "mscclppRegisterBuffer: regMem is NULL");
  memset(regMem, 0, sizeof(*regMem));
  uint8_t* slots = calloc((size_t)comm->nranks, MSCCLPP_REGMEM_BLOB_BYTES);
  mscclppRegMem_t* remote = calloc((size_t)comm->nranks, sizeof(*remote));
  mscclppRegMem_t local = NULL;
  mscclppResult_t res = mscclppSuccess;
  if (slots == NULL || remote == NULL) {
    res = MPP_ERR(mscclppSystemError, "mscclppRegisterBuffer: out of host memory for %d ranks", comm->nranks);
    goto out;
  }
  /* A rank that cannot register still takes part (with an empty slot), so that the others fail
   * promptly instead of waiting for it. */
  mscclppResult_t mine = local_memory == NULL || size == 0
                             ? MPP_ERR(mscclppInvalidArgument, "mscclppRegisterBuffer: local_memory is NULL or size is 0")
                             : regmem_register(comm, local_memory, size, &local);
  if (mine == mscclppSuccess) regblob_encode(&local->t.d, slots + (size_t)comm->rank * MSCCLPP_REGMEM_BLOB_BYTES);
  MPP_CHECK_GOTO(bootstrap_allgather(comm->boot, slots, MSCCLPP_REGMEM_BLOB_BYTES), res, out);
  if (mine == mscclppSuccess) mine = import_all(comm, slots, remote);
  MPP_CHECK_GOTO(agree_all(comm, mine, (int32_t*)(void*)slots), res, out);
  *regMem = (mscclppRegisteredMemory){.local = local, .remote = remote, .nranks = comm->nranks};
  free(slots);
  return mscclppSuccess;
out:
  if (remote != NULL)
    for (int r = 0; r < comm->nranks; r++) regmem_free(remote[r]);
  regmem_free(local);
  free(remote);
  free(slots);
  return res;
}

/* Success when every registration in r (local and each remote) is a live handle. */
static mscclppResult_t handles_alive(const mscclppRegisteredMemory* r) {
  MPP_CHECK(handle_check(HANDLE_REGMEM, r->local, "mscclppRegisteredMemoryRelease"));
  if (r->remote != NULL)
    for (int i = 0; i < r->nranks; i++)
      if (r->remote[i] != NULL) MPP_CHECK(handle_check(HANDLE_REGMEM, r->remote[i], "mscclppRegisteredMemoryRelease"));
  return mscclppSuccess;
}

mscclppResult_t mscclppRegisteredMemoryRelease(mscclppRegisteredMemory* regMem) {
  err_clear();
  MPP_CHECK_ARG(regMem != NULL, "mscclppRegisteredMemoryRelease: regMem is NULL");
  if (regMem->local == NULL && regMem->remote == NULL) return mscclppSuccess; /* released already (zeroed) */
  mscclppResult_t res = handles_alive(regMem);
  if (res != mscclppSuccess) { /* its communicator was destroyed (it freed them): only the array is left */
    free(regMem->remote);
    memset(regMem, 0, sizeof(*regMem));
    return res;
  }
  if (regMem->remote != NULL)
    for (int r = 0; r < regMem->nranks; r++) regmem_free(regMem->remote[r]);
  regmem_free(regMem->local);
  free(regMem->remote);
  memset(regMem, 0, sizeof(*regMem));
  return mscclppSuccess;
}
