/* tokens.c - semaphore tokens: slots cut from registered slabs, the pairwise exchange that tells
 * each side where the other's token is, and the cache of peers' slabs imported here (one import
 * per slab, however many semaphores live in it). */
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "channel/ext.h"
#include "core/comm.h"
#include "core/connection.h"
#include "util/err.h"
#include "util/log.h"

#define GPU_SLAB_BYTES (2u << 20)  /* the cuMem granularity anyway */
#define HOST_SLAB_BYTES (64u << 10)
#define TOKEN_MSG_MAGIC 0x4b4f544du /* "MTOK" */

/* What each side of a token exchange sends. */
struct token_msg {
  uint32_t magic;
  int32_t status; /* mscclppSuccess, or this side's failure (then nothing else is valid) */
  int32_t kind;   /* enum token_kind */
  int32_t rank;
  uint64_t offset;
  uint64_t blob_len;
  uint8_t blob[MSCCLPP_REGMEM_BLOB_BYTES];
};

/* Allocates and registers a new slab. */
static mscclppResult_t slab_new(struct chan_ext* x) {
  if (x->nslabs == TOKEN_MAX_SLABS)
    return MPP_ERR(mscclppSystemError, "channels: all %d token slabs are used (%u semaphores)", TOKEN_MAX_SLABS,
                   (unsigned)(TOKEN_MAX_SLABS * (x->gpu ? GPU_SLAB_BYTES : HOST_SLAB_BYTES) / TOKEN_SLOT_BYTES));
  struct token_slab* s = &x->slabs[x->nslabs];
  uint64_t size = x->gpu ? GPU_SLAB_BYTES : HOST_SLAB_BYTES;
  int prev = ext_dev_enter(x->dev);
  mscclppResult_t res = mscclppMemAlloc(&s->base, size, x->gpu ? mscclppMemCuda : mscclppMemHost);
  ext_dev_leave(prev, x->dev);
  if (res != mscclppSuccess) return res;
  res = mscclppRegisterMemory(x->comm, s->base, size, &s->reg);
  if (res == mscclppSuccess) {
    s->blob_len = sizeof(s->blob);
    res = mscclppRegMemSerialize(s->reg, s->blob, &s->blob_len);
  }
  if (res != mscclppSuccess) {
    if (s->reg) mscclppRegMemRelease(s->reg);
    mscclppMemFree(s->base);
    memset(s, 0, sizeof(*s));
    return res;
  }
  s->size = size;
  s->used = 0;
  x->nslabs++;
  return mscclppSuccess;
}

mscclppResult_t tokens_alloc(struct chan_ext* x, struct token_slot* out) {
  if (x->nslabs == 0 || x->slabs[x->nslabs - 1].used + TOKEN_SLOT_BYTES > x->slabs[x->nslabs - 1].size)
    MPP_CHECK(slab_new(x));
  struct token_slab* s = &x->slabs[x->nslabs - 1];
  out->slab = x->nslabs - 1;
  out->offset = s->used;
  out->token = (uint64_t*)((char*)s->base + s->used);
  out->expected = (uint64_t*)((char*)s->base + s->used + TOKEN_EXPECTED_OFFSET);
  s->used += TOKEN_SLOT_BYTES;
  return mscclppSuccess;
}

mscclppResult_t ext_import(struct chan_ext* x, const void* blob, size_t len, mscclppRegMem_t* out) {
  for (struct import_entry* e = x->imports; e != NULL; e = e->next)
    if (e->blob_len == len && memcmp(e->blob, blob, len) == 0) {
      *out = e->mem;
      return mscclppSuccess;
    }
  if (len > MSCCLPP_REGMEM_BLOB_BYTES)
    return MPP_ERR(mscclppInvalidArgument, "channels: a peer's blob of %zu bytes exceeds %d", len, MSCCLPP_REGMEM_BLOB_BYTES);
  struct import_entry* e = calloc(1, sizeof(*e));
  if (e == NULL) return MPP_ERR(mscclppSystemError, "channels: out of host memory");
  int prev = ext_dev_enter(x->dev);
  mscclppResult_t res = mscclppRegMemDeserialize(x->comm, blob, len, &e->mem);
  ext_dev_leave(prev, x->dev);
  if (res != mscclppSuccess) {
    free(e);
    return res;
  }
  memcpy(e->blob, blob, len);
  e->blob_len = len;
  e->next = x->imports;
  x->imports = e;
  *out = e->mem;
  return mscclppSuccess;
}

/* Swaps messages with the peer, the lower rank sending first. */
static mscclppResult_t swap(struct mscclppConnection* conn, const struct token_msg* mine, struct token_msg* theirs) {
  struct mscclppComm* comm = conn->comm;
  int tag = boot_tag(BOOT_TAG_CHAN, conn->t.tag);
  if (comm->rank < conn->t.peer) {
    MPP_CHECK(bootstrap_send(comm->boot, conn->t.peer, tag, mine, sizeof(*mine)));
    MPP_CHECK(bootstrap_recv(comm->boot, conn->t.peer, tag, theirs, sizeof(*theirs)));
  } else {
    MPP_CHECK(bootstrap_recv(comm->boot, conn->t.peer, tag, theirs, sizeof(*theirs)));
    MPP_CHECK(bootstrap_send(comm->boot, conn->t.peer, tag, mine, sizeof(*mine)));
  }
  return mscclppSuccess;
}

static const char* kind_name(int k) { return k == TOKEN_MEMORY ? "memory-channel" : k == TOKEN_PORT ? "port-channel" : "unknown"; }

/* Checks the peer's message against ours. */
static mscclppResult_t check_msg(struct mscclppConnection* conn, enum token_kind kind, const struct token_msg* m) {
  if (m->magic != TOKEN_MSG_MAGIC || m->rank != conn->t.peer)
    return MPP_ERR(mscclppRemoteError, "semaphore exchange with rank %d (tag %d): malformed message", conn->t.peer, conn->t.tag);
  if (m->status != mscclppSuccess)
    return MPP_ERR(mscclppRemoteError, "semaphore exchange with rank %d (tag %d): the peer failed to make its side (see its log)",
                   conn->t.peer, conn->t.tag);
  if (m->kind != (int32_t)kind)
    return MPP_ERR(mscclppInvalidUsage,
                   "semaphore exchange with rank %d (tag %d): this rank makes a %s semaphore, the peer a %s one (make "
                   "them in the same order on both sides)",
                   conn->t.peer, conn->t.tag, kind_name(kind), kind_name(m->kind));
  if (m->blob_len == 0 || m->blob_len > MSCCLPP_REGMEM_BLOB_BYTES)
    return MPP_ERR(mscclppRemoteError, "semaphore exchange with rank %d: blob length %llu out of range", conn->t.peer,
                   (unsigned long long)m->blob_len);
  return mscclppSuccess;
}

mscclppResult_t tokens_exchange(struct chan_ext* x, struct mscclppConnection* conn, enum token_kind kind,
                                mscclppResult_t local, const struct token_slot* mine, struct token_peer* theirs) {
  struct token_msg out, in;
  memset(&out, 0, sizeof(out));
  out.magic = TOKEN_MSG_MAGIC;
  out.status = (int32_t)local;
  out.kind = (int32_t)kind;
  out.rank = x->comm->rank;
  if (local == mscclppSuccess) {
    const struct token_slab* s = &x->slabs[mine->slab];
    out.offset = mine->offset;
    out.blob_len = s->blob_len;
    memcpy(out.blob, s->blob, s->blob_len);
  }
  MPP_CHECK(swap(conn, &out, &in));
  if (local != mscclppSuccess) return local;
  MPP_CHECK(check_msg(conn, kind, &in));
  pthread_mutex_lock(&x->lock);
  mscclppResult_t res = ext_import(x, in.blob, (size_t)in.blob_len, &theirs->mem);
  pthread_mutex_unlock(&x->lock);
  MPP_CHECK(res);
  void* base = NULL;
  size_t size = 0;
  int owner = -1;
  MPP_CHECK(mscclppRegMemInfo(theirs->mem, &base, &size, &owner));
  if (owner != conn->t.peer || in.offset % TOKEN_SLOT_BYTES != 0 || in.offset > size || size - in.offset < TOKEN_SLOT_BYTES)
    return MPP_ERR(mscclppRemoteError, "semaphore exchange with rank %d: token at offset %llu of rank %d's %zu bytes is invalid",
                   conn->t.peer, (unsigned long long)in.offset, owner, size);
  theirs->offset = in.offset;
  theirs->ptr = base != NULL ? (uint64_t*)((char*)base + in.offset) : NULL;
  return mscclppSuccess;
}

void tokens_fini(struct chan_ext* x) {
  while (x->imports != NULL) {
    struct import_entry* e = x->imports;
    x->imports = e->next;
    mscclppRegMemRelease(e->mem);
    free(e);
  }
  int prev = ext_dev_enter(x->dev);
  for (int i = 0; i < x->nslabs; i++) {
    mscclppRegMemRelease(x->slabs[i].reg);
    mscclppMemFree(x->slabs[i].base);
  }
  ext_dev_leave(prev, x->dev);
  x->nslabs = 0;
}
