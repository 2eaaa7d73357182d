/* mscclpp/memory.h - shareable allocations and registered memory: a buffer of one rank that
 * other ranks can import and reach through a connection. Compiles as C11 and as C++. */
#ifndef MSCCLPP_MEMORY_H_
#define MSCCLPP_MEMORY_H_

#include <mscclpp/comm.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  mscclppMemHost = 0, /* host memory other processes of this host can map (shm transport) */
  mscclppMemCuda = 1  /* GPU memory of the current device, exportable as a POSIX file descriptor */
} mscclppMemKind_t;

/* Allocates size bytes that other processes can map. Host memory is page aligned and zeroed (a
 * memfd mapped MAP_SHARED: the shm transport maps it into peers of this host); CUDA memory is a
 * zeroed cuMem allocation of the current device, exportable as a POSIX file descriptor, rounded up
 * to the device's granularity. CUDA memory without a usable device (or CUDA in the build) is
 * InvalidUsage. */
mscclppResult_t mscclppMemAlloc(void** ptr, size_t size, mscclppMemKind_t kind);
/* Frees memory from mscclppMemAlloc. Freeing a pointer it did not return is InvalidArgument. */
mscclppResult_t mscclppMemFree(void* ptr);

/* A registered buffer: local (this rank owns it) or imported (another rank's, reachable here). */
typedef struct mscclppRegMem* mscclppRegMem_t;

/* Largest blob mscclppRegMemSerialize writes. */
#define MSCCLPP_REGMEM_BLOB_BYTES 256

/* Registers [ptr, ptr+size) of this rank: host memory (any; memory from mscclppMemAlloc can also
 * be mapped by peers of this host), cudaMalloc memory or cuMem memory. Plain host memory (malloc,
 * stack) is reachable over tcp only. The memory must stay allocated until the registration is
 * released. */
mscclppResult_t mscclppRegisterMemory(mscclppComm_t comm, void* ptr, size_t size, mscclppRegMem_t* mem);
/* Writes the description a peer needs to import mem. *blobSize: capacity in, bytes used out. */
mscclppResult_t mscclppRegMemSerialize(mscclppRegMem_t mem, void* blob, size_t* blobSize);
/* Imports a peer's serialized registered memory (mapping it where this rank can: shared host memory
 * of a rank of this host; GPU memory of a rank of this host when this rank is a GPU rank). Every
 * field of the blob is checked (magic, version, checksum, communicator, owner rank, pid and host
 * against the communicator's records, sizes and offsets); a blob from another communicator, or this
 * rank's own, is refused. The owner must keep its registration until the import returned. */
mscclppResult_t mscclppRegMemDeserialize(mscclppComm_t comm, const void* blob, size_t blobSize, mscclppRegMem_t* mem);
/* Where the buffer is mapped in this process (NULL when it is only reachable by messages), its
 * size and the rank that owns it. Any output may be NULL. */
mscclppResult_t mscclppRegMemInfo(mscclppRegMem_t mem, void** ptr, size_t* size, int* ownerRank);
/* Unmaps an imported buffer or unregisters a local one. Registrations and imports still open when
 * their communicator is destroyed are released with it (their handles become invalid). */
mscclppResult_t mscclppRegMemRelease(mscclppRegMem_t mem);

/* The seed API's registered buffer: one local registration plus every peer's import. */
typedef struct {
  mscclppRegMem_t local;
  mscclppRegMem_t* remote; /* nranks entries, remote[own rank] == NULL */
  int nranks;
} mscclppRegisteredMemory;

/* Collective: every rank registers its buffer and imports every other rank's. Returns on every rank
 * once all ranks have imported; a failure on any rank fails it on all (RemoteError naming the rank
 * on the others). */
mscclppResult_t mscclppRegisterBuffer(mscclppComm_t comm, void* local_memory, size_t size,
                                      mscclppRegisteredMemory* regMem);
/* Releases what mscclppRegisterBuffer created. */
mscclppResult_t mscclppRegisteredMemoryRelease(mscclppRegisteredMemory* regMem);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MSCCLPP_MEMORY_H_ */
