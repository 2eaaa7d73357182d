/* zc.c - the zero-copy collectives (allreduce, allgather, reducescatter, alltoall; broadcast and
 * reduce captured only) for calls being captured into a CUDA graph: the kernel (zc.cu) reads peers'
 * inputs and writes peers' outputs directly, so the data moves once and no inbox or pipeline round
 * is needed.
 *
 * Why only captured calls. A kernel can touch a peer's buffer only once this rank has mapped it,
 * and learning a peer's buffers takes a host exchange. Ranks may use different buffers from call
 * to call (NCCL allows it), so no rank can tell from its own cache whether its peers need an
 * exchange; every zero-copy call therefore exchanges, which only pays when the call is captured
 * once and replayed many times. Every rank captures the same calls (as with every collective), so
 * the exchanges meet; a mismatch (another collective, count or datatype) fails on every rank.
 * Allocations are registered and imported once (core/ubuf.c) and kept until teardown, since the
 * graph names them.
 *
 * Large eager calls (algo_win_find: MSCCLPP_REGISTERED_ZC_MIN) on buffers registered with
 * mscclppCommBufferRegister swap too (every rank registers, by the rule NCCL sets for registered
 * buffers, so every rank takes this path): the swap costs tens of microseconds, which the copy it
 * saves repays only for large messages.
 * Buffers in registered windows (algo/window.c) need no exchange: every rank mapped every peer's
 * window when it was registered, and the windows' rule puts a call's buffers at the same offsets on
 * every rank. Calls on windows take these algorithms also outside capture.
 *
 * Calls outside capture (not on windows), pre-multiplied sums (a rank cannot scale a peer's input by the peer's
 * scalar), empty calls and in-place alltoall (a rank would overwrite a part its peer has not sent
 * yet) run the bulk sibling; the last is agreed in the exchange, so every rank takes the same path. */
#include <string.h>

#include "algo/algo.h"
#include "algo/gpu/gpu.h"
#include "channel/ext.h"
#include "core/comm.h"
#include "core/connection.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>

#define ZC_MAGIC 0x475a4331u /* "GZC1" */
#define ZC_TAG 2             /* under BOOT_TAG_ALGO (1: the setup's scratch exchange) */

struct zc_buf {
  uint64_t id, off, len, blob_len;
  uint8_t blob[MSCCLPP_REGMEM_BLOB_BYTES];
};

/* What every rank sends every peer per captured call. */
struct zc_hello {
  uint32_t magic, ok;  /* ok 0: this rank failed to describe its buffers */
  uint32_t coll, dtype;
  uint64_t count;
  uint32_t usable;      /* 0: this rank needs the bulk path (in-place alltoall) */
  int32_t root;         /* broadcast and reduce: the call's root (every rank must name the same) */
  struct zc_buf buf[2]; /* input, output */
};

int gpu_stream_captured(void* stream) {
  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing((cudaStream_t)stream, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone;
}

void gpu_in_out_bytes(int nranks, const struct algo_args* a, uint64_t* in, uint64_t* out) {
  uint64_t b = (uint64_t)a->count * a->es, n = (uint64_t)nranks;
  *in = a->coll == ALGO_COLL_REDUCESCATTER || a->coll == ALGO_COLL_ALLTOALL ? b * n : b;
  *out = a->coll == ALGO_COLL_ALLGATHER || a->coll == ALGO_COLL_ALLTOALL ? b * n : b;
}

/* This rank's message: its buffers' registrations (made on a miss) and whether it can go zero copy. */
static mscclppResult_t describe(struct gpu_net* g, const struct algo_comm* ac, const struct algo_args* a,
                                struct zc_hello* h) {
  uint64_t inb, outb;
  gpu_in_out_bytes(ac->nranks, a, &inb, &outb);
  memset(h, 0, sizeof(*h));
  h->magic = ZC_MAGIC, h->coll = (uint32_t)a->coll, h->dtype = (uint32_t)a->dtype, h->count = a->count;
  h->root = algo_coll_rooted(a->coll) ? a->root : -1;
  h->usable = !(a->coll == ALGO_COLL_ALLTOALL && a->send == a->recv); /* api.c refuses partial overlap */
  const void* ptr[2] = {a->send, a->recv};
  uint64_t len[2] = {inb, outb};
  /* a broadcast's input and a reduce's output exist on the root alone: len 0 tells the peers */
  int root = ac->rank == a->root;
  if (a->coll == ALGO_COLL_BROADCAST && !root) len[0] = 0;
  if (a->coll == ALGO_COLL_REDUCE && !root) len[1] = 0;
  for (int t = 0; t < 2; t++) {
    if (len[t] == 0) continue; /* the call is not empty (gpu_graph_only_begin): absent here */
    struct ubuf_reg* reg = NULL;
    MPP_CHECK(ubuf_reg_get(&g->ub, ptr[t], len[t], t ? "recvbuff" : "sendbuff", &reg));
    struct zc_buf* b = &h->buf[t];
    b->id = reg->id, b->off = (uint64_t)((const char*)ptr[t] - reg->base), b->len = len[t], b->blob_len = reg->blob_len;
    memcpy(b->blob, reg->blob, reg->blob_len);
  }
  h->ok = 1;
  return mscclppSuccess;
}

/* Peer q's buffer b as mapped here (NULL when q's call has no such buffer: len 0). */
static mscclppResult_t take(struct gpu_net* g, int q, const struct zc_buf* b, char** out) {
  *out = NULL;
  if (b->len == 0) return mscclppSuccess;
  struct ubuf_import* im = NULL;
  MPP_CHECK(ubuf_import_range(&g->ub, q, b->id, b->blob, b->blob_len, b->off, b->len, &im));
  *out = im->base + b->off;
  return mscclppSuccess;
}

/* Checks peer q's message against this rank's and maps its buffers into z. */
static mscclppResult_t accept(struct gpu_net* g, int q, const struct zc_hello* mine, const struct zc_hello* th,
                              struct gx_zc* z) {
  if (th->magic != ZC_MAGIC)
    return MPP_ERR(mscclppRemoteError, "GPU collectives: malformed zero-copy message from rank %d", q);
  if (!th->ok) return MPP_ERR(mscclppRemoteError, "GPU collectives: rank %d failed to set up its buffers for this call", q);
  if (th->coll != mine->coll || th->dtype != mine->dtype || th->count != mine->count)
    return MPP_ERR(mscclppInvalidUsage, "GPU collectives (zero-copy call): rank %d calls %s of %llu elements of type %u, "
                   "rank %d %s of %llu of type %u (every rank must make the same calls)", q,
                   algo_coll_name((enum algo_coll)th->coll), (unsigned long long)th->count, th->dtype, g->d.rank,
                   algo_coll_name((enum algo_coll)mine->coll), (unsigned long long)mine->count, mine->dtype);
  if (th->root != mine->root)
    return MPP_ERR(mscclppInvalidUsage, "GPU collectives (zero-copy call): rank %d calls %s with root %d, rank %d with "
                   "root %d (every rank must name the same root)", q, algo_coll_name((enum algo_coll)th->coll), th->root,
                   g->d.rank, mine->root);
  char* src = NULL;
  MPP_CHECK(take(g, q, &th->buf[0], &src));
  z->peer_src[q] = src;
  return take(g, q, &th->buf[1], &z->peer_dst[q]);
}

/* Swaps messages with every peer (all of them, also after a failure, so nobody waits) and fills z;
 * *usable: every rank can go zero copy. */
static mscclppResult_t exchange(struct gpu_net* g, struct algo_comm* ac, mscclppResult_t local, const struct zc_hello* mine,
                                struct gx_zc* z, int* usable) {
  mscclppResult_t res = local;
  *usable = (int)mine->usable;
  for (int q = 0; q < ac->nranks; q++) {
    if (q == ac->rank) continue;
    struct zc_hello th;
    mscclppResult_t r = bootstrap_swap(ac->comm->boot, q, boot_tag(BOOT_TAG_ALGO, ZC_TAG), mine, &th, sizeof(th));
    if (r == mscclppSuccess && res == mscclppSuccess) r = accept(g, q, mine, &th, z);
    if (r == mscclppSuccess) *usable &= (int)th.usable;
    if (res == mscclppSuccess) res = r;
  }
  return res;
}

/* Every rank's buffers of this call as mapped here (collective over the communicator); *usable:
 * every rank can go zero copy. Driver calls that capture would refuse run in relaxed capture mode:
 * none of them touches the stream. */
static mscclppResult_t zc_map(struct gpu_net* g, struct algo_comm* ac, const struct algo_args* a, struct gx_zc* z,
                              int* usable) {
  memset(z, 0, sizeof(*z));
  z->peer_src[ac->rank] = a->send, z->peer_dst[ac->rank] = a->recv;
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  int prev = ext_dev_enter(g->dev);
  struct zc_hello mine;
  mscclppResult_t res = exchange(g, ac, describe(g, ac, a, &mine), &mine, z, usable);
  ext_dev_leave(prev, g->dev);
  cudaThreadExchangeStreamCaptureMode(&mode);
  return res;
}

/* Every rank's buffers of this call from the windows holding this rank's (no exchange: the windows'
 * rule puts them at the same offsets on every rank). In place, allgather's input and
 * reducescatter's output are rank q's block of the other buffer, so they lie at q's offset there. */
static void zc_from_windows(const struct algo_comm* ac, const struct algo_args* a, struct gx_zc* z) {
  uint64_t so = (uint64_t)((const char*)a->send - a->win[0]->base), ro = (uint64_t)((char*)a->recv - a->win[1]->base);
  uint64_t b = (uint64_t)a->count * a->es, me = (uint64_t)ac->rank;
  int ag_in_place = a->coll == ALGO_COLL_ALLGATHER && (const char*)a->send == (const char*)a->recv + me * b;
  int rs_in_place = a->coll == ALGO_COLL_REDUCESCATTER && (const char*)a->recv == (const char*)a->send + me * b;
  for (int q = 0; q < ac->nranks; q++) {
    uint64_t qs = ag_in_place ? ro + (uint64_t)q * b : so, qr = rs_in_place ? so + (uint64_t)q * b : ro;
    z->peer_src[q] = a->win[0]->peer[q] + qs, z->peer_dst[q] = a->win[1]->peer[q] + qr;
  }
}

/* MSCCLPP_WINDOW_CHECK: the exchanged buffers (z) must be where the windows say. */
static mscclppResult_t zc_window_check(const struct algo_comm* ac, const struct algo_args* a, const struct gx_zc* z) {
  struct gx_zc w;
  zc_from_windows(ac, a, &w);
  for (int q = 0; q < ac->nranks; q++)
    if (w.peer_src[q] != z->peer_src[q] || w.peer_dst[q] != z->peer_dst[q])
      return MPP_ERR(mscclppInvalidUsage, "%s on registered windows: rank %d's buffers are not at the offsets of this "
                     "rank's in their windows (a call on windows uses the same offsets on every rank)",
                     algo_coll_name(a->coll), q);
  return mscclppSuccess;
}

/* The peers' buffers of a call on windows, a captured call or a large call on registered buffers
 * (the last two swap registrations with every peer), into z; *usable as for zc_map. */
static mscclppResult_t zc_peers(struct gpu_net* g, struct algo_comm* ac, const struct algo_args* a, struct gx_zc* z,
                                int* usable) {
  if (a->win[0] == NULL || param_int(PARAM_WINDOW_CHECK)) {
    MPP_CHECK(zc_map(g, ac, a, z, usable));
    return a->win[0] ? zc_window_check(ac, a, z) : mscclppSuccess;
  }
  memset(z, 0, sizeof(*z));
  zc_from_windows(ac, a, z);
  *usable = !(a->coll == ALGO_COLL_ALLTOALL && a->send == a->recv); /* the same on every rank, by the windows' rule */
  return mscclppSuccess;
}

uint64_t gpu_zc_chunk(const struct gpu_net* g, uint64_t maxlen) {
  int64_t floor = param_int(PARAM_ALGO_GPU_ZC_CHUNK);
  uint64_t c = floor < 16 ? 16 : (uint64_t)floor;
  uint64_t need = (maxlen + (uint64_t)g->d.nblocks - 1) / (uint64_t)g->d.nblocks;
  if (need > c) c = need;
  return (c + 15) / 16 * 16;
}

/* The reduce ring's step and slots: block b's ring slots are its share of every rank's bulk region
 * (the bulk kernel's stage, unused by zero-copy calls), MSCCLPP_ALGO_GPU_REDUCE_RING_STEP bytes
 * each (at most the whole share), at least one. */
static void ring_shape(const struct gpu_net* g, struct gx_zc* z) {
  uint64_t share = 2ull * (uint64_t)g->d.nranks * g->d.bulk_slot / (uint64_t)g->d.nblocks / 16 * 16;
  int64_t step = param_int(PARAM_ALGO_GPU_REDUCE_RING_STEP);
  uint64_t sub = step < 16 ? 16 : (uint64_t)step / 16 * 16;
  z->ring_sub = sub < share ? sub : share;
  z->ring_slots = share / z->ring_sub;
}

void gpu_zc_shape(const struct gpu_net* g, const struct gx_plan* p, struct gx_zc* z) {
  int64_t min = param_int(PARAM_ALGO_GPU_ZC_TWO_PASS_MIN);
  z->chunk = gpu_zc_chunk(g, p->maxlen);
  z->two_pass = 0;
  if (p->mode == GX_REDUCE && !p->one_src && !p->one_dst && min > 0 && p->maxlen >= (uint64_t)min)
    z->two_pass = param_int(PARAM_ALGO_GPU_ZC_STAGGER) ? 2 : 1;
  int64_t steps = param_int(PARAM_ALGO_GPU_BCAST_CHAIN);
  z->chain_sub = 0;
  if (p->one_src && p->send_len[p->root] == 0 && steps > 0) {
    uint64_t sub = (z->chunk + (uint64_t)steps - 1) / (uint64_t)steps;
    sub = (sub + 15) / 16 * 16;
    z->chain_sub = sub < GPU_CHAIN_MIN_STEP ? GPU_CHAIN_MIN_STEP : sub;
  }
  z->ring_sub = z->ring_slots = 0;
  if (p->ring) ring_shape(g, z);
}

/* Whether zero-copy broadcast a runs as the push chain (root-free plan): 3+ ranks, the chain on, from
 * MSCCLPP_ALGO_GPU_BCAST_CHAIN_MIN bytes; the same on every rank. */
static int bcast_chain_fits(const struct algo_args* a, int nranks) {
  int64_t min = param_int(PARAM_ALGO_GPU_BCAST_CHAIN_MIN);
  return a->coll == ALGO_COLL_BROADCAST && nranks >= 3 && param_int(PARAM_ALGO_GPU_BCAST_CHAIN) > 0 &&
         (uint64_t)a->count * a->es >= (uint64_t)(min < 0 ? 0 : min);
}

int gpu_bcast_chain(const struct algo_args* a, int nranks) {
  return !a->captured && param_int(PARAM_ALGO_GPU_EAGER_ZC) != 0 && bcast_chain_fits(a, nranks);
}

mscclppResult_t gpu_graph_only_begin(struct algo_comm* ac, const struct algo_args* a, struct gpu_net** g,
                                     struct gx_zc* z, struct gx_plan p[2], int* go) {
  int red = algo_coll_reduces(a->coll);
  int rooted = algo_coll_rooted(a->coll);
  *go = 0;
  /* rooted calls: captured only (off the root, the buffer the call lacks need not be in a window) */
  int mapped = rooted ? a->captured : a->captured || a->win[0] || a->registered;
  if (!mapped || a->count == 0 || (red && a->op == ELEM_OP_PREMUL)) return mscclppSuccess;
  MPP_CHECK(gpu_net_get(ac, a->stream, g));
  int usable = 0;
  MPP_CHECK(zc_peers(*g, ac, a, z, &usable));
  if (!usable) LOG_DEBUG_(LOG_SUB_ALGO, "%s: in-place on some rank: bulk kernel", algo_coll_name(a->coll));
  *go = usable;
  if (usable && rooted)
    gpu_plan_rooted(a, ac->rank, ac->nranks, gpu_rooted_split(a, ac->nranks, bcast_chain_fits(a, ac->nranks), 1), p);
  else if (usable)
    (void)gpu_plans(a, ac->rank, ac->nranks, a->coll == ALGO_COLL_ALLREDUCE, p);
  return mscclppSuccess;
}

mscclppResult_t gpu_coll_zc(struct algo_comm* ac, const struct algo_args* a) {
  struct gpu_net* g = NULL;
  struct gx_zc z;
  struct gx_plan p[2];
  int go = 0;
  MPP_CHECK(gpu_graph_only_begin(ac, a, &g, &z, p, &go));
  if (!go) return gpu_bulk_of(a->coll)(ac, a);
  z.put_reduced = a->coll == ALGO_COLL_ALLREDUCE || a->coll == ALGO_COLL_BROADCAST; /* each slice into every output */
  z.open_relaxed = param_int(PARAM_ALGO_GPU_ZC_OPEN_RELAXED) != 0;
  gpu_zc_shape(g, &p[0], &z);
  MPP_CHECK(gpu_launch_zc(&g->d, &p[0], &z, a->stream));
  g->graph_launches++;
  return mscclppSuccess;
}

#else /* no CUDA: never captured */

int gpu_stream_captured(void* stream) {
  (void)stream;
  return 0;
}

mscclppResult_t gpu_coll_zc(struct algo_comm* ac, const struct algo_args* a) { return gpu_bulk_of(a->coll)(ac, a); }

#endif
