/* regmem.h - registered memory inside the library: what backs a buffer (memalloc.c), the blob that
 * describes it to peers (regblob.c), the handle itself (regmem.c) and the table of local regions
 * that the tcp transport's receiving threads write into (regtable.c). */
#ifndef MPP_CORE_REGMEM_H_
#define MPP_CORE_REGMEM_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <mscclpp/memory.h>

struct mscclppComm;

/* ---- memalloc.c: what backs a pointer ---------------------------------------------------------- */

/* How a buffer is backed; decides which transports can reach it. */
enum mem_kind {
  MEM_KIND_HOST = 0,     /* plain host memory (malloc, stack, ...): reachable over tcp only */
  MEM_KIND_HOST_SHM = 1, /* mscclppMemAlloc(host): a memfd other processes of this host can map */
  MEM_KIND_CUDA_IPC = 2, /* cudaMalloc memory: a legacy CUDA IPC handle of the allocation base */
  MEM_KIND_CUDA_VMM = 3, /* cuMem memory exportable as a POSIX file descriptor */
  MEM_KIND_COUNT
};

/* The allocation that contains a buffer. */
struct mem_info {
  enum mem_kind kind;
  void* base;          /* start of the allocation (the buffer itself for MEM_KIND_HOST) */
  uint64_t alloc_size; /* bytes from base */
  int fd;              /* HOST_SHM: the memfd (owned by memalloc; dup it to keep it) */
  int device;          /* CUDA kinds: the device the memory lives on; else -1 */
};

/* mscclppMemAlloc and mscclppMemFree without touching the caller's last error. */
mscclppResult_t mem_alloc(void** ptr, size_t size, mscclppMemKind_t kind);
mscclppResult_t mem_free(void* ptr);

/* Finds what backs [ptr, ptr+size): an mscclppMemAlloc allocation, else (with CUDA) device memory
 * by its pointer attributes, else plain host memory. InvalidArgument when the range runs past the
 * end of the allocation that contains ptr. */
mscclppResult_t mem_classify(const void* ptr, uint64_t size, struct mem_info* out);

/* True when ptr is GPU memory (copies to or from it need cudaMemcpy). */
static inline int mem_kind_is_device(enum mem_kind k) { return k == MEM_KIND_CUDA_IPC || k == MEM_KIND_CUDA_VMM; }

/* Copies size bytes between any two of host memory and GPU memory (dev >= 0) of this process;
 * synchronous: the bytes have landed when it returns. */
mscclppResult_t mem_copy(void* dst, int dst_dev, const void* src, int src_dev, uint64_t size);

/* ---- regblob.c: the serialized description ----------------------------------------------------- */

#define REGBLOB_MAGIC 0x4d52504du /* "MPRM" little endian */
#define REGBLOB_VERSION 1
#define REGBLOB_BYTES 168         /* <= MSCCLPP_REGMEM_BLOB_BYTES */
#define REGBLOB_IPC_HANDLE_BYTES 64

/* Bit of mscclppTransport_t t in regmem_desc.transports. */
#define TRANSPORT_BIT(t) (1u << (unsigned)(t))

/* Everything a peer learns about a registered buffer. See regblob.c for the wire layout. */
struct regmem_desc {
  uint64_t comm_id;
  int32_t owner;       /* rank that owns the memory */
  int32_t pid;         /* owner's process id */
  uint64_t host_hash;  /* owner's host */
  uint32_t transports; /* TRANSPORT_BIT()s of the transports that can reach it */
  int32_t kind;        /* enum mem_kind */
  int32_t cuda_dev;    /* owner's device for CUDA kinds, else -1 */
  uint64_t size;       /* registered bytes */
  uint64_t alloc_size; /* SHM/CUDA kinds: the allocation's bytes (>= alloc_offset + size) */
  uint64_t alloc_offset; /* where the buffer starts in the allocation */
  uint64_t region_id;  /* tcp: id in the owner's region table */
  uint64_t fd_id;      /* HOST_SHM / CUDA_VMM: export id in the owner's fd service */
  uint64_t fd_key;     /* ... and the secret that fetches it */
  uint8_t ipc_handle[REGBLOB_IPC_HANDLE_BYTES]; /* CUDA_IPC: cudaIpcMemHandle_t */
};

/* Writes d as REGBLOB_BYTES bytes (checksummed) into out. */
void regblob_encode(const struct regmem_desc* d, uint8_t out[REGBLOB_BYTES]);

/* Parses and validates a blob of len bytes against the receiving communicator (its comm_id and
 * nranks): length, magic, version, checksum, comm id, owner rank, kind, transports, and that size,
 * offset and allocation size are consistent without overflow. Every failure is InvalidArgument
 * naming the field. */
mscclppResult_t regblob_decode(const void* blob, size_t len, uint64_t comm_id, int nranks, struct regmem_desc* d);

/* ---- regmem.c: the handle ---------------------------------------------------------------------- */

/* An intrusive doubly-linked list node; a list is a sentinel node pointing at itself when empty. */
struct list_node {
  struct list_node *prev, *next;
};
static inline void list_init(struct list_node* head) { head->prev = head->next = head; }
static inline void list_push(struct list_node* head, struct list_node* n) {
  n->next = head;
  n->prev = head->prev;
  head->prev->next = n;
  head->prev = n;
}
static inline void list_unlink(struct list_node* n) {
  n->prev->next = n->next;
  n->next->prev = n->prev;
  n->prev = n->next = n;
}

struct mscclppRegMem {
  struct list_node link; /* in the communicator's list of open registrations (first member) */
  struct mscclppComm* comm;
  struct regmem_desc d;
  int local;     /* 1: this rank owns it */
  void* ptr;     /* local: the registered address; imported: where it is mapped, or NULL */
  int is_device; /* ptr is GPU memory */
  /* Resources of an import, released by the transport that made them. */
  void* map_base; /* shm: mmap'ed range / cuda-ipc: what was opened or reserved */
  size_t map_len;
  uint64_t cu_handle; /* cuda VMM: the imported allocation handle */
};

/* Registers [ptr, ptr+size) of this rank with every transport that can reach it. */
mscclppResult_t regmem_register(struct mscclppComm* comm, void* ptr, uint64_t size, struct mscclppRegMem** out);
/* Validates a peer's blob (regblob_decode, then against what comm knows about the owner) and
 * imports it with every offered transport in `want` (TRANSPORT_BIT()s; REGMEM_ALL) that this rank
 * can use. */
#define REGMEM_ALL 0xffffffffu
mscclppResult_t regmem_import(struct mscclppComm* comm, const void* blob, size_t len, uint32_t want,
                              struct mscclppRegMem** out);
/* Releases a registration or import (unexports, unmaps) and frees it; NULL is ignored. */
void regmem_free(struct mscclppRegMem* mem);

/* ---- regtable.c: local regions the tcp receiver writes ---------------------------------------- */

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

#endif /* MPP_CORE_REGMEM_H_ */
