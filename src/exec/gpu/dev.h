/* dev.h - what the GPU executor's host code and its kernel share: the kernel's parameters, the
 * device form of a plan, the error record, and the size rules the kernel evaluates itself.
 * Plain C (included by host C and by the kernel, nvcc C++).
 *
 * Buffers, as the kernel finds them: io[q * 2 + t] is rank q's input (t = 0) or output (t = 1)
 * of this call, mapped here (this rank's own pointers for q == rank); io_reg[q * 2 + t] is the
 * start of the registration that holds it (port puts give offsets from there); scr[q] is rank
 * q's scratch (its whole registration), of which a call uses the half `half` (double scratch). */
#ifndef MPP_EXEC_GPU_DEV_H_
#define MPP_EXEC_GPU_DEV_H_

#include <stdint.h>

#include <mscclpp/device.h>
#include <mscclpp/memory_channel.h>
#include <mscclpp/port_channel.h>
#include <mscclpp/wait.h>

#include "plan/plan.h"

#define XG_MAX_THREADS 1024
#define XG_MAX_PTRS 4096 /* buffer pointers one op may need at once (shared memory, 32 KiB) */
#define XG_STAGE_MAX (16 * 1024) /* a block's program is copied to shared memory up to this size */

/* Port puts of an op pair with its channels one to one (dst d through channel d): the put and
 * its signal (and flush) go as one trigger. Kept in plan_op.pad of the device copy. */
#define XG_OP_PAIRED 0x1u

/* A block's program is one segment of the image: a header (its counts), its ops (first_ref /
 * first_chan count from the segment's references / channel references), references, each
 * reference's port route, channel references and each channel reference's slot, in that order,
 * every section 16-aligned (xg_seg_layout). Segments sit at a fixed stride (the largest), block b's
 * at b * seg_stride, so a block finds its own without reading a table first. The kernel copies
 * its segment into shared memory when the stride fits (xg_params.stage): decoding an op then
 * reads no global memory. */
struct xg_seg_head {
  uint32_t nops, nrefs, nchans, pad;
};

/* Byte offsets of a segment's sections, and its size. */
struct xg_seg {
  uint32_t ops, refs, routes, chans, slots, bytes;
};

MSCCLPP_HOST_DEVICE_INLINE uint32_t xg_a16(uint32_t x) { return (x + 15u) & ~15u; }

MSCCLPP_HOST_DEVICE_INLINE void xg_seg_layout(uint32_t nops, uint32_t nrefs, uint32_t nchans, struct xg_seg* s) {
  s->ops = xg_a16((uint32_t)sizeof(struct xg_seg_head));
  s->refs = s->ops + xg_a16(nops * (uint32_t)sizeof(struct plan_op));
  s->routes = s->refs + xg_a16(nrefs * (uint32_t)sizeof(struct plan_ref));
  s->chans = s->routes + xg_a16(nrefs * (uint32_t)sizeof(int32_t));
  s->slots = s->chans + xg_a16(nchans * (uint32_t)sizeof(struct plan_chanref));
  s->bytes = s->slots + xg_a16(nchans * (uint32_t)sizeof(int32_t));
}

/* The per-size layout (plan.h's plan_layout, the fields the kernel needs). */
struct xg_layout {
  uint64_t period, slot, unit_base, align_unit, chunk_max, scr_stride;
  uint32_t chunks, extra;
};

static inline void xg_layout_of(const struct plan_layout* l, struct xg_layout* x) {
  x->period = l->period, x->slot = l->slot, x->unit_base = l->unit_base, x->align_unit = l->align_unit;
  x->chunk_max = l->chunk_max, x->scr_stride = l->scr_stride, x->chunks = l->chunks, x->extra = l->extra;
}

/* A block's op table for one call shape (table.c makes it on the host once per buffer context and
 * scratch generation; the kernel stages it beside the program): what the kernel would otherwise
 * work out at every op, through chains of dependent loads and divisions (docs/plans.md, Op
 * tables). win[i]: op i's window, except a pipeline's (s = 0, n = its iterations) and a nested op's
 * (s = 0, n = its whole length; the iteration's window is taken at run time). Then, per scratch
 * half a call may use (two with double scratch), ptr[j] for the block's reference j: the address
 * of its range at its op's win.s in a call using that half, packets at twice the data offset
 * (xg_ref_pkt); NULL for switch references. */
struct xg_win {
  uint64_t s, n;
};

/* Byte offset of half h's pointers in a block's table, and the table's size. */
MSCCLPP_HOST_DEVICE_INLINE uint32_t xg_tab_ptrs(uint32_t nops, uint32_t nrefs, uint32_t h) {
  return xg_a16(nops * (uint32_t)sizeof(struct xg_win)) + h * xg_a16(nrefs * (uint32_t)sizeof(char*));
}
MSCCLPP_HOST_DEVICE_INLINE uint32_t xg_tab_bytes(uint32_t nops, uint32_t nrefs, uint32_t halves) {
  return xg_tab_ptrs(nops, nrefs, halves);
}

/* Whether reference i of an op (code, nsrc sources first) holds packets: the destinations of
 * cpkt / ppkt, the (first) source of upkt, every reference of rppkt and gstorepkt, all but the
 * first source and the first destination of the packet reductions. (Switch ops expand their
 * references themselves.) */
MSCCLPP_HOST_DEVICE_INLINE int xg_ref_pkt(int code, int i, int nsrc) {
  int dst = i >= nsrc, first = dst ? i == nsrc : i == 0;
  switch (code) {
    case PLAN_OP_CPKT:
    case PLAN_OP_PPKT: return dst;
    case PLAN_OP_UPKT: return !dst && first;
    case PLAN_OP_RPPKT:
    case PLAN_OP_GSTOREPKT: return 1;
    case PLAN_OP_REPKT:
    case PLAN_OP_RESPKT:
    case PLAN_OP_RECPKT:
    case PLAN_OP_RECSPKT: return !first;
    default: return 0;
  }
}

/* Device words of a communicator's executor. launches: calls completed so far (the last block
 * of a call advances it, so graph replays get fresh packet flags); claim: 0 until a block
 * records a failure in the error record. */
struct xg_words {
  uint64_t launches;
  uint32_t claim;
  uint32_t pad;
};

/* Why a block stopped (xg_err.what). */
enum xg_fail {
  XG_FAIL_TIMEOUT = MSCCLPP_DEVICE_TIMEOUT, /* a bounded wait hit its bound (device-error record says which) */
  XG_FAIL_ABORTED = MSCCLPP_DEVICE_ABORTED, /* another wait of this rank failed first */
  XG_FAIL_BAD_OP = 3                        /* an op code the kernel's switch has no case for */
};

/* The first failure of a call (host-mapped; flag = 1 once the fields are complete). */
struct xg_err {
  uint32_t flag;
  int32_t block, op, code, peer, what;
  uint64_t plan_id, launch;
};

/* The kernel's parameters (passed by value; every pointer is device-visible). */
struct xg_params {
  /* the plan's device image (image.c) */
  const char* prog;                 /* the blocks' program segments, seg_stride bytes apart */
  const int32_t* pch_slot;          /* plan-local port channel -> port channel slot */
  const int32_t* sw_ranks;          /* switch channel i: members sw_ranks[sw_off[i] ..+ sw_n[i]] */
  const int32_t* sw_off;
  const int32_t* sw_n;
  uint64_t* bar_count;              /* [barrier id] */
  uint64_t* bar_round;
  unsigned long long* sems;         /* [semaphore id], reset to sem_init by the last block */
  const int64_t* sem_init;
  uint32_t* done;                   /* blocks of this call that finished */
  int32_t nblocks, nsems, nbarriers, maxptrs;
  /* dynamic shared memory: maxptrs op pointers at 0, the call's buffer table (io, io_reg, scr:
   * 5 * nranks pointers) at smem_io, the block's program segment at smem_prog if stage */
  uint32_t smem_io, smem_prog, seg_stride;
  int32_t stage, nranks, pad0;
  /* this call's buffers and channels */
  const uint32_t* port_ids;         /* the binding's port ids (bind.c), NULL without port puts */
  char* const* io;
  char* const* io_reg;
  char* const* scr;
  const mscclppMemoryDevSemaphore* msem;
  const mscclppPortChannel* pch;
  struct xg_words* words;
  struct xg_err* err;
  mscclppWaitInfo wait;             /* barriers, semaphores and packets (peer -1) */
  struct xg_layout layout;
  uint64_t align;                   /* tbg slices: max(buffer_alignment, 8) */
  uint64_t plan_id;
  int32_t rank, dtype, esize, pkt;  /* pkt: 16 (LL16) or 8 (LL8) */
  int32_t double_scratch;
  int32_t counted; /* the call needs its number (packets, double scratch) or resets (semaphores, barriers) */
  /* this call shape's op tables (NULL: the kernel works windows and addresses out itself), one per
   * block tab_stride bytes apart, staged at smem_tab (only ever with the program staged) */
  const char* tab;
  uint32_t tab_stride, smem_tab;
};

/* Whether an op may run in the lean kernel (launch.h): copies, puts and gets through memory, the
 * packet ops, and pipelines of those. Every op code is listed (-Wswitch-enum); an unknown code is
 * not lean, and the full kernel then stops at it (xk_bad_op). */
MSCCLPP_HOST_DEVICE_INLINE int xg_op_lean(const struct plan_op* op) {
  switch ((enum plan_op_code)op->code) {
    case PLAN_OP_NOP:
    case PLAN_OP_PIPELINE:
    case PLAN_OP_GET:
    case PLAN_OP_COPY:
    case PLAN_OP_CPKT:
    case PLAN_OP_PPKT:
    case PLAN_OP_UPKT:
    case PLAN_OP_REPKT:
    case PLAN_OP_RESPKT:
    case PLAN_OP_RECPKT:
    case PLAN_OP_RECSPKT: return 1;
    case PLAN_OP_PUT:
    case PLAN_OP_RPPKT: return op->chan_type != PLAN_CH_PORT;
    case PLAN_OP_BARRIER:
    case PLAN_OP_SEM_ACQUIRE:
    case PLAN_OP_SEM_RELEASE:
    case PLAN_OP_SIGNAL:
    case PLAN_OP_RLXSIGNAL:
    case PLAN_OP_WAIT:
    case PLAN_OP_RLXWAIT:
    case PLAN_OP_FLUSH:
    case PLAN_OP_PWS:
    case PLAN_OP_PWSF:
    case PLAN_OP_RE:
    case PLAN_OP_RES:
    case PLAN_OP_RRE:
    case PLAN_OP_RRES:
    case PLAN_OP_GLRE:
    case PLAN_OP_GLRES:
    case PLAN_OP_GSTORE:
    case PLAN_OP_GSTOREPKT: return 0;
  }
  return 0;
}

/* ---- the size rule of src/plan/sizes.c, for the kernel (must stay equal to it) --------------- */

/* a / b, b > 0, by 32-bit division when both fit (a GPU thread divides 64-bit numbers by a long
 * chain of dependent instructions: about 300 cycles, at every op). */
MSCCLPP_HOST_DEVICE_INLINE uint64_t xg_div(uint64_t a, uint64_t b) {
  if (((a | b) >> 32) == 0) return (uint32_t)a / (uint32_t)b;
  return a / b;
}

MSCCLPP_HOST_DEVICE_INLINE uint64_t xg_group_off(const struct xg_layout* l, uint64_t j) {
  if (j >= l->chunks) return l->period;
  return j * l->unit_base + (j < l->extra ? j : l->extra) * l->align_unit;
}

/* Byte offset of chunk k of a buffer of type btype (data-equivalent for packets). */
MSCCLPP_HOST_DEVICE_INLINE uint64_t xg_chunk_off(const struct xg_layout* l, int btype, uint64_t k) {
  if (btype == PLAN_BUF_SCR) return k * l->slot;
  uint64_t q = xg_div(k, l->chunks);
  return q * l->period + xg_group_off(l, k - q * l->chunks);
}

/* Bytes an op with references r[0..n) moves: its first input/output reference decides; an op on
 * scratch only moves what the data grid has at the same chunk indices. */
MSCCLPP_HOST_DEVICE_INLINE uint64_t xg_op_len(const struct xg_layout* l, const struct plan_ref* r, int n) {
  if (n == 0) return 0;
  const struct plan_ref* f = &r[0];
  for (int i = 0; i < n; i++)
    if (r[i].btype != PLAN_BUF_SCR) {
      f = &r[i];
      break;
    }
  return xg_chunk_off(l, PLAN_BUF_OUT, (uint64_t)f->index + f->size) - xg_chunk_off(l, PLAN_BUF_OUT, f->index);
}

/* The window [*s, *s + *n) of an op of length len: pipeline iteration it of unit u (u = 0: no
 * pipeline), then slice tbg_id of tbg_size, aligned to align (docs/plans.md, Op semantics). */
MSCCLPP_HOST_DEVICE_INLINE void xg_window(uint64_t len, uint64_t it, uint64_t u, uint32_t tbg_id, uint32_t tbg_size,
                                          uint64_t align, uint64_t* s, uint64_t* n) {
  *s = 0, *n = len;
  if (u) {
    *s = it * u;
    *n = *s >= len ? 0 : (len - *s < u ? len - *s : u);
  }
  if (tbg_size > 1) {
    uint64_t per = xg_div(*n + tbg_size - 1, tbg_size);
    per = xg_div(per + align - 1, align) * align;
    uint64_t lo = per * tbg_id, hi = lo + per;
    if (lo > *n) lo = *n;
    if (hi > *n) hi = *n;
    *s += lo, *n = hi - lo;
  }
}

/* Iterations of a pipeline op at a layout. */
MSCCLPP_HOST_DEVICE_INLINE uint64_t xg_pipe_iters(const struct xg_layout* l, const struct plan_op* op) {
  uint64_t total = (uint64_t)op->num_chunks * l->chunk_max;
  return total ? xg_div(total + op->unit_size - 1, op->unit_size) : 1;
}

#endif /* MPP_EXEC_GPU_DEV_H_ */
