/* ubuf.h - users' GPU buffers as peers reach them, for the GPU executor and the zero-copy
 * collectives: the allocation holding a buffer is registered once (a later buffer inside it hits
 * the cache by address range), and each peer's allocation is imported once (by the peer's
 * registration id). A hit costs one driver call: the allocation's buffer id, which changes when
 * the memory is freed and allocated again at the same address; such an entry is retired (kept,
 * never used again) and the new allocation registered. Registrations and imports live until
 * ubuf_fini: ports and captured graphs may still name them. Not thread-safe (callers hold their
 * own lock or run one call at a time). */
#ifndef MPP_CORE_UBUF_H_
#define MPP_CORE_UBUF_H_

#include <stddef.h>
#include <stdint.h>

#include <mscclpp/memory.h>

struct mscclppComm;

/* A local allocation registered for peers. */
struct ubuf_reg {
  char* base;
  uint64_t size, buf_id, id; /* id: never reused in this cache, names it to peers */
  uint64_t aseq;             /* the GPU collectives' announcement of it (algo/gpu/ezc.c); 0: none yet */
  mscclppRegMem_t mem;
  uint8_t blob[MSCCLPP_REGMEM_BLOB_BYTES];
  uint32_t blob_len;
};

/* A peer's allocation imported here. */
struct ubuf_import {
  int peer;
  uint64_t id;
  mscclppRegMem_t mem;
  char* base; /* mapped here; NULL for a peer of another host (reached through port channels only) */
};

struct ubuf_cache {
  struct mscclppComm* comm;
  int rank, dev;
  const char* who; /* names the user in messages ("GPU executor") */
  struct ubuf_reg* regs;
  int nregs, capregs;
  uint64_t next_id;
  struct ubuf_import* imports;
  int nimports, capimports;
};

void ubuf_init(struct ubuf_cache* c, struct mscclppComm* comm, int rank, int dev, const char* who);
/* The registration of the allocation holding [ptr, ptr + size), made on a miss (local only).
 * InvalidArgument naming `what` when it is not memory of the cache's GPU. The pointer stays valid
 * until the next ubuf_reg_get. */
mscclppResult_t ubuf_reg_get(struct ubuf_cache* c, const void* ptr, uint64_t size, const char* what, struct ubuf_reg** out);
/* Peer's allocation `id` imported from its blob (once). */
mscclppResult_t ubuf_import_get(struct ubuf_cache* c, int peer, uint64_t id, const void* blob, size_t len,
                                struct ubuf_import** out);
/* ubuf_import_get for a buffer of len bytes at off in that allocation, from a peer's message:
 * RemoteError when the blob is malformed or the range exceeds the allocation. */
mscclppResult_t ubuf_import_range(struct ubuf_cache* c, int peer, uint64_t id, const void* blob, size_t blob_len,
                                  uint64_t off, uint64_t len, struct ubuf_import** out);
void ubuf_fini(struct ubuf_cache* c);

#endif /* MPP_CORE_UBUF_H_ */
