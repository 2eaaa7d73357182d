/* ctx.c - buffer contexts: for one (input, output) pair of this rank, where every rank's input and
 * output of the same call are mapped here, and the registrations that hold them (for ports). A
 * context is found again by the pointers, sizes and registration ids of this rank's buffers; a
 * new one is a collective step: every pair swaps its buffers' registrations (blob, id, offset in
 * the allocation), each side imports the other's allocation once (core/ubuf.c). Kept until teardown
 * (a captured graph names its context's device table). */
#include "exec/gpu/state.h"

#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

#define XG_CTX_MAGIC 0x58435458u /* "XCTX" */

struct ctx_buf {
  uint64_t id, off, len, blob_len;
  uint8_t blob[MSCCLPP_REGMEM_BLOB_BYTES];
};

struct ctx_hello {
  uint32_t magic, ok;
  struct ctx_buf buf[2]; /* input, output */
};

static int same(const struct xg_ctx* c, const void* send, uint64_t sb, const void* recv, uint64_t rb, uint64_t in_id,
                uint64_t out_id) {
  return c->send == send && c->sb == sb && c->recv == recv && c->rb == rb && c->in_id == in_id && c->out_id == out_id;
}

static void describe(struct ctx_buf* b, const struct ubuf_reg* r, const char* p, uint64_t len) {
  if (!r) return;
  b->id = r->id, b->off = (uint64_t)(p - r->base), b->len = len, b->blob_len = r->blob_len;
  memcpy(b->blob, r->blob, r->blob_len);
}

/* Peer q's buffer t from its message into the context. */
static mscclppResult_t take(struct xg_state* st, struct xg_ctx* c, int q, int t, const struct ctx_buf* b) {
  if (b->len == 0) return mscclppSuccess;
  struct ubuf_import* im = NULL;
  MPP_CHECK(ubuf_import_range(&st->ub, q, b->id, b->blob, b->blob_len, b->off, b->len, &im));
  int i = q * 2 + t;
  char* base = im->base ? im->base : XG_UNMAPPED; /* another host's: port puts only */
  c->host[i] = base + b->off, c->host[2 * st->nranks + i] = base, c->mem[i] = im->mem;
  return mscclppSuccess;
}

/* Swaps with every peer (all of them, also after a failure, so nobody waits) and fills c. */
static mscclppResult_t exchange(struct xg_state* st, struct xg_ctx* c, mscclppResult_t local, const struct ctx_hello* mine) {
  mscclppResult_t res = local;
  for (int q = 0; q < st->nranks; q++) {
    if (q == st->rank) continue;
    struct ctx_hello th;
    mscclppResult_t r = xg_swap(st, q, XG_TAG_CTX, mine, &th, sizeof(th));
    if (r == mscclppSuccess && th.magic != XG_CTX_MAGIC)
      r = MPP_ERR(mscclppRemoteError, "GPU executor: malformed buffer message from rank %d", q);
    else if (r == mscclppSuccess && !th.ok)
      r = MPP_ERR(mscclppRemoteError, "GPU executor: rank %d failed to set up its buffers for this call", q);
    else if (r == mscclppSuccess && (th.buf[0].len != mine->buf[0].len || th.buf[1].len != mine->buf[1].len))
      r = MPP_ERR(mscclppInvalidUsage, "GPU executor: rank %d calls with %llu input and %llu output bytes, rank %d with "
                  "%llu and %llu (every rank must pass the same sizes)", q, (unsigned long long)th.buf[0].len,
                  (unsigned long long)th.buf[1].len, st->rank, (unsigned long long)mine->buf[0].len,
                  (unsigned long long)mine->buf[1].len);
    for (int t = 0; t < 2 && r == mscclppSuccess && res == mscclppSuccess; t++) r = take(st, c, q, t, &th.buf[t]);
    if (res == mscclppSuccess) res = r;
  }
  return res;
}

static struct xg_ctx* ctx_new(int nranks) {
  struct xg_ctx* c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->mem = calloc((size_t)nranks * 2, sizeof(*c->mem));
  c->host = calloc((size_t)nranks * 4, sizeof(char*));
  if (!c->mem || !c->host) {
    free(c->mem), free(c->host), free(c);
    return NULL;
  }
  return c;
}

static void ctx_free(struct xg_ctx* c) {
  if (!c) return;
  if (c->dev) cudaFree(c->dev);
  free(c->mem), free(c->host), free(c);
}

/* The local side of a new context: own pointers and registrations, and the message for peers. */
static mscclppResult_t fill_local(struct xg_state* st, struct xg_ctx* c, struct ubuf_reg* ri, struct ubuf_reg* ro,
                                  struct ctx_hello* mine) {
  memset(mine, 0, sizeof(*mine));
  mine->magic = XG_CTX_MAGIC;
  describe(&mine->buf[0], ri, c->send, c->sb);
  describe(&mine->buf[1], ro, c->recv, c->rb);
  int i = st->rank * 2, n2 = 2 * st->nranks;
  c->host[i] = (char*)c->send, c->host[i + 1] = (char*)c->recv;
  c->host[n2 + i] = ri ? ri->base : NULL, c->host[n2 + i + 1] = ro ? ro->base : NULL;
  c->mem[i] = ri ? ri->mem : NULL, c->mem[i + 1] = ro ? ro->mem : NULL;
  if (st->nctx >= XG_MAX_CTX)
    return MPP_ERR(mscclppInvalidUsage, "GPU executor (rank %d): %d buffer sets in use; at most %d per communicator",
                   st->rank, st->nctx, XG_MAX_CTX);
  if (st->nctx == st->capctx) {
    int cap = st->capctx ? st->capctx * 2 : 16;
    struct xg_ctx** a = realloc(st->ctxs, (size_t)cap * sizeof(*a));
    if (!a) return MPP_ERR(mscclppSystemError, "GPU executor: out of host memory");
    st->ctxs = a, st->capctx = cap;
  }
  mine->ok = 1;
  return mscclppSuccess;
}

static mscclppResult_t ctx_make(struct xg_state* st, struct xg_ctx* c, struct ubuf_reg* ri, struct ubuf_reg* ro) {
  struct ctx_hello mine;
  mscclppResult_t res = exchange(st, c, fill_local(st, c, ri, ro, &mine), &mine);
  size_t bytes = (size_t)st->nranks * 4 * sizeof(char*);
  if (res == mscclppSuccess) res = xg_dev_alloc((void**)&c->dev, bytes, "buffer pointers");
  if (res == mscclppSuccess) res = xg_upload(c->dev, c->host, bytes);
  return res;
}

/* The context with these exact buffers, or NULL. */
static struct xg_ctx* lookup(struct xg_state* st, const void* send, uint64_t sb, const void* recv, uint64_t rb,
                             uint64_t in_id, uint64_t out_id) {
  if (st->last_ctx && same(st->last_ctx, send, sb, recv, rb, in_id, out_id)) return st->last_ctx;
  for (int i = st->nctx - 1; i >= 0; i--)
    if (same(st->ctxs[i], send, sb, recv, rb, in_id, out_id)) return st->ctxs[i];
  return NULL;
}

/* A rank that cannot describe its buffers still answers every peer (ok = 0), so that the call
 * fails on every rank at once; its own failure stays the last error. */
static mscclppResult_t refuse(struct xg_state* st, mscclppResult_t local) {
  struct ctx_hello mine, theirs;
  memset(&mine, 0, sizeof(mine));
  mine.magic = XG_CTX_MAGIC;
  for (int q = 0; q < st->nranks; q++)
    if (q != st->rank && xg_swap(st, q, XG_TAG_CTX, &mine, &theirs, sizeof(theirs)) != mscclppSuccess) break;
  return local;
}

mscclppResult_t xg_ctx_get(struct xg_state* st, const void* send, uint64_t sb, const void* recv, uint64_t rb,
                           void* stream, struct xg_ctx** out) {
  struct ubuf_reg *ri = NULL, *ro = NULL;
  mscclppResult_t res = sb ? ubuf_reg_get(&st->ub, send, sb, "sendbuff", &ri) : mscclppSuccess;
  if (res == mscclppSuccess && rb) res = ubuf_reg_get(&st->ub, recv, rb, "recvbuff", &ro);
  uint64_t in_id = ri ? ri->id : 0, out_id = ro ? ro->id : 0;
  struct xg_ctx* c = res == mscclppSuccess ? lookup(st, send, sb, recv, rb, in_id, out_id) : NULL;
  if (c) {
    *out = st->last_ctx = c;
    return mscclppSuccess;
  }
  (void)stream;
  if (res != mscclppSuccess) return refuse(st, res);
  c = ctx_new(st->nranks);
  if (!c) return refuse(st, MPP_ERR(mscclppSystemError, "GPU executor: out of host memory"));
  c->send = send, c->sb = sb, c->recv = recv, c->rb = rb, c->in_id = in_id, c->out_id = out_id;
  res = ctx_make(st, c, ri, ro);
  if (res != mscclppSuccess) { /* nothing was kept: a later call with these buffers tries again */
    ctx_free(c);
    return res;
  }
  st->ctxs[st->nctx++] = c;
  *out = st->last_ctx = c;
  return mscclppSuccess;
}

void xg_ctx_fini(struct xg_state* st) {
  for (int i = 0; i < st->nctx; i++) ctx_free(st->ctxs[i]);
  free(st->ctxs);
}

#endif /* MSCCLPP_HAVE_CUDA */
