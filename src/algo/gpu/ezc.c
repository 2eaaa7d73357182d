/* ezc.c - eager zero copy: the host side of staged calls that go zero copy once every rank's
 * buffers are mapped on every peer (gpu.h, struct ezc_desc; the kernel side is in zc.cu).
 *
 * Why not swap addresses per call, as captured calls do: an eager call must not wait on its peers'
 * hosts (a bootstrap round trip costs tens of microseconds, more than the copies it would save
 * below tens of MiB). Instead each rank tells its peers about an allocation once, without waiting:
 * the first staged call naming it sends every peer an announcement (the registration and the next
 * announcement number), and each peer imports what it has been sent at the start of its next
 * staged call, in order, recording the mapping in its device table on the call's stream. The call
 * that announced stays staged; the kernel of a later call finds from every rank's descriptor that
 * every rank has imported what the call names, and moves the data straight between the users'
 * buffers. All ranks decide from the same descriptors, so they all take the same path, and a rank
 * whose import failed (or whose table is full) only keeps the calls naming that allocation staged.
 *
 * Lifetime: registrations and imports live until the communicator's teardown (ubuf.h). A buffer
 * freed and allocated again at the same address gets a new registration (ubuf's buffer id check)
 * and so a new announcement. */
#include <string.h>

#include "algo/algo.h"
#include "algo/gpu/gpu.h"
#include "core/comm.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/timeutil.h"

#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>

#define EZC_TAG 4 /* under BOOT_TAG_ALGO (1: setup, 2: zc.c, 3: win.c) */
#define EZC_MAGIC 0x455a4331u /* "EZC1" */

_Static_assert(sizeof(struct ezc_desc) == EZC_DESC_BYTES, "the meta region's slot holds one descriptor");

/* One allocation told to a peer. */
struct ezc_ann {
  uint32_t magic, pad;
  uint64_t aseq, id, size, blob_len;
  uint8_t blob[MSCCLPP_REGMEM_BLOB_BYTES];
};

/* Stops using rank q's announcements here (why: logged once). */
static void ezc_stick(struct gpu_net* g, int q, const char* why) {
  if (g->ez.stuck[q]) return;
  g->ez.stuck[q] = 1;
  LOG_WARN_(LOG_SUB_ALGO, "GPU collectives (rank %d): rank %d's buffers stay staged for eager calls: %s", g->d.rank, q, why);
}

/* Imports announcement m of peer q and enqueues its table row on stream (q's announcements are
 * taken in order; one out of order or failing sticks q). */
static void ezc_import(struct gpu_net* g, int q, const struct ezc_ann* m, void* stream) {
  if (g->ez.stuck[q]) return;
  if (m->magic != EZC_MAGIC || m->aseq != g->ez.seen[q] + 1 || m->aseq > EZC_SLOTS || m->blob_len > sizeof(m->blob)) {
    ezc_stick(g, q, "malformed or out-of-order announcement");
    return;
  }
  struct ubuf_import* im = NULL;
  int quiet = err_quiet(1);
  mscclppResult_t res = ubuf_import_range(&g->ub, q, m->id, m->blob, m->blob_len, 0, m->size, &im);
  err_quiet(quiet);
  if (res != mscclppSuccess || im->base == NULL) {
    ezc_stick(g, q, res != mscclppSuccess ? err_last() : "its memory is not mapped here");
    err_clear();
    return;
  }
  struct ezc_entry e = {.base = im->base, .size = m->size};
  /* From pageable memory: the copy takes e before returning; stream order puts the row ahead of
   * every later kernel on this stream, the first that may name it. */
  cudaError_t ce = cudaMemcpyAsync(&g->ez.table[(uint64_t)q * EZC_SLOTS + m->aseq - 1], &e, sizeof(e),
                                   cudaMemcpyHostToDevice, (cudaStream_t)stream);
  if (ce != cudaSuccess) {
    ezc_stick(g, q, cudaGetErrorString(ce));
    return;
  }
  g->ez.seen[q] = m->aseq;
}

/* Every announcement the peers have sent so far, imported. */
static mscclppResult_t ezc_drain(struct gpu_net* g, struct algo_comm* ac, void* stream) {
  for (int q = 0; q < ac->nranks; q++) {
    if (q == ac->rank) continue;
    for (;;) {
      struct ezc_ann m;
      int got = 0;
      MPP_CHECK(bootstrap_try_recv(ac->comm->boot, q, boot_tag(BOOT_TAG_ALGO, EZC_TAG), &m, sizeof(m), &got));
      if (!got) break;
      ezc_import(g, q, &m, stream);
    }
  }
  return mscclppSuccess;
}

/* reg's announcement number, announcing it to every peer first when it has none; 0 when the
 * table is full (the allocation stays staged). */
static mscclppResult_t ezc_announce(struct gpu_net* g, struct algo_comm* ac, struct ubuf_reg* reg, uint64_t* aseq) {
  *aseq = reg->aseq;
  if (reg->aseq) return mscclppSuccess;
  if (g->ez.announced >= EZC_SLOTS) {
    if (!g->ez.full_logged)
      LOG_INFO_(LOG_SUB_ALGO, "GPU collectives (rank %d): %d allocations announced for eager zero copy; later ones "
                "stay staged", ac->rank, EZC_SLOTS);
    g->ez.full_logged = 1;
    return mscclppSuccess;
  }
  struct ezc_ann m;
  memset(&m, 0, sizeof(m));
  m.magic = EZC_MAGIC, m.aseq = g->ez.announced + 1, m.id = reg->id, m.size = reg->size, m.blob_len = reg->blob_len;
  memcpy(m.blob, reg->blob, reg->blob_len);
  for (int q = 0; q < ac->nranks; q++)
    if (q != ac->rank) MPP_CHECK(bootstrap_send(ac->comm->boot, q, boot_tag(BOOT_TAG_ALGO, EZC_TAG), &m, sizeof(m)));
  reg->aseq = *aseq = ++g->ez.announced;
  return mscclppSuccess;
}

/* The allocation holding [ptr, +len) and ptr's offset in it; *aseq 0 when it cannot be named to
 * peers (not memory of this GPU: the call stays staged). */
static mscclppResult_t ezc_name(struct gpu_net* g, struct algo_comm* ac, const void* ptr, uint64_t len,
                                uint64_t* aseq, uint64_t* off) {
  struct ubuf_reg* reg = NULL;
  *aseq = 0, *off = 0;
  int quiet = err_quiet(1);
  mscclppResult_t res = ubuf_reg_get(&g->ub, ptr, len, "buffer", &reg);
  err_quiet(quiet);
  if (res != mscclppSuccess) {
    LOG_DEBUG_(LOG_SUB_ALGO, "eager zero copy: %s", err_last());
    err_clear();
    return mscclppSuccess;
  }
  *off = (uint64_t)((const char*)ptr - reg->base);
  return ezc_announce(g, ac, reg, aseq);
}

mscclppResult_t gpu_ezc_prepare(struct gpu_net* g, struct algo_comm* ac, const struct algo_args* a, struct gx_zc* z) {
  if (!param_int(PARAM_ALGO_GPU_EAGER_ZC)) return mscclppSuccess;
  uint64_t t0 = time_now_ns();
  MPP_CHECK(ezc_drain(g, ac, a->stream));
  g->ez.drain_ns += time_now_ns() - t0;
  struct ezc_desc* d = &z->me;
  memset(d, 0, sizeof(*d));
  uint64_t inb, outb;
  gpu_in_out_bytes(ac->nranks, a, &inb, &outb);
  /* a broadcast's input and a reduce's output exist on the root alone (NULL elsewhere: aseq 0) */
  if (a->send != NULL) MPP_CHECK(ezc_name(g, ac, a->send, inb, &d->in_aseq, &d->in_off));
  if (a->recv != NULL) MPP_CHECK(ezc_name(g, ac, a->recv, outb, &d->out_aseq, &d->out_off));
  memcpy(d->seen, g->ez.seen, sizeof(d->seen));
  int root = ac->rank == a->root;
  int need_in = !(a->coll == ALGO_COLL_BROADCAST && !root), need_out = !(a->coll == ALGO_COLL_REDUCE && !root);
  /* in-place alltoall would overwrite a part a peer has not read yet (zc.c) */
  d->usable = (d->in_aseq || !need_in) && (d->out_aseq || !need_out) &&
              !(a->coll == ALGO_COLL_ALLTOALL && a->send == a->recv);
  z->ezc = 1, z->table = g->ez.table, z->hits = g->ez.hits;
  g->ez.calls++, g->ez.prep_ns += time_now_ns() - t0;
  return mscclppSuccess;
}

void gpu_ezc_report(struct gpu_net* g) {
  if (g->ez.calls == 0 || g->ez.hits == NULL) return;
  uint32_t h = 0;
  if (cudaMemcpy(&h, g->ez.hits, sizeof(h), cudaMemcpyDeviceToHost) != cudaSuccess) return;
  uint64_t imported = 0;
  for (int q = 0; q < g->d.nranks; q++) imported += g->ez.seen[q];
  LOG_INFO_(LOG_SUB_ALGO, "GPU collectives (rank %d): %u of %llu eager staged launches went zero copy; %llu "
            "allocations announced, %llu of the peers' imported; %.2f us of host time per launch to prepare (%.2f "
            "taking and importing announcements), %.2f per launch in all",
            g->d.rank, h, (unsigned long long)g->ez.calls, (unsigned long long)g->ez.announced,
            (unsigned long long)imported, (double)g->ez.prep_ns / 1e3 / (double)g->ez.calls, (double)g->ez.drain_ns / 1e3 / (double)g->ez.calls,
            (double)g->ez.launch_ns / 1e3 / (double)g->ez.calls);
}

uint64_t gpu_ezc_hits(struct gpu_net* g) {
  uint32_t h = 0;
  if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpy(&h, g->ez.hits, sizeof(h), cudaMemcpyDeviceToHost) != cudaSuccess)
    return 0;
  return h;
}

#endif
