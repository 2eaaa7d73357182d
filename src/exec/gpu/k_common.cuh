/* k_common.cuh - what every op of the executor kernel uses: the running block's view (xk), buffer
 * addresses, failure recording, and the packet unit helpers (LL16 and LL8).
 *
 * Cooperation. Every thread of a block runs every op; data moves are split over the threads,
 * synchronization ops run on one thread per channel. The kernel puts a __syncthreads after every
 * op, so an op sees everything the block's earlier ops wrote, and a failure recorded by any
 * thread (xk.rc, shared) stops the whole block there. */
#ifndef MPP_EXEC_GPU_K_COMMON_CUH_
#define MPP_EXEC_GPU_K_COMMON_CUH_

#include <mscclpp/atomics.h>
#include <mscclpp/packet.h>

#include "exec/gpu/dev.h"

/* The running block. */
struct xk {
  const struct xg_params* P;
  uint32_t b;            /* block index */
  uint32_t op_index;     /* index of the running op in the block (errors name it) */
  int32_t code;          /* its op code */
  uint32_t flag;         /* this call's packet flag */
  int32_t pkt;           /* the call's packet format (xg_params.pkt), beside the flag: one load per packet op */
  uint64_t half;         /* this call's scratch half (byte offset) */
  uint64_t launch;       /* this call's number */
  uint32_t nops;                     /* the block's ops ... */
  const struct plan_op* ops;
  const struct plan_ref* refs;       /* ... references, channel references, their slots and routes
                                      * (shared memory when staged, else the image) */
  const struct plan_chanref* chans;  /* the block's channel references */
  const int32_t* slots;              /* ... their slots */
  const int32_t* routes;             /* the block's ref routes */
  const struct xg_win* win;          /* the block's op table (dev.h; shared), or NULL: computed per op */
  char* const* tptr;                 /* ... its reference addresses */
  char** ptrs;                       /* shared: XG_MAX_PTRS buffer pointers of the running op */
  char* const* io;                   /* shared: the call's buffer table (dev.h: io, io_reg, scr) */
  char* const* io_reg;
  char* const* scr;
  volatile int* rc;                  /* shared: nonzero once a thread of the block failed */
};

__device__ __forceinline__ uint32_t xk_tid() { return threadIdx.x; }
__device__ __forceinline__ uint32_t xk_nt() { return blockDim.x; }

/* Rank owner's buffer of type btype in this call (scratch: this call's half). */
__device__ __forceinline__ char* xk_base(const xk& k, int owner, int btype) {
  if (btype == PLAN_BUF_SCR) return k.scr[owner] + k.half;
  return k.io[owner * 2 + btype];
}

/* Start of the registration that holds rank owner's buffer of type btype (port-put offsets). */
__device__ __forceinline__ char* xk_reg(const xk& k, int owner, int btype) {
  if (btype == PLAN_BUF_SCR) return k.scr[owner];
  return k.io_reg[owner * 2 + btype];
}

__device__ __forceinline__ int xk_owner(const xk& k, const plan_ref& r) {
  return r.kind == PLAN_REF_LOCAL ? k.P->rank : r.rank;
}

/* Data-equivalent offset of ref's chunks plus s. */
__device__ __forceinline__ uint64_t xk_off(const xk& k, const plan_ref& r, uint64_t s) {
  return xg_chunk_off(&k.P->layout, r.btype, r.index) + s;
}

/* Address of a local or remote ref's range + s; pkt: of its packets (twice the data offset). */
__device__ __forceinline__ char* xk_ptr(const xk& k, const plan_ref& r, uint64_t s, int pkt) {
  uint64_t off = xk_off(k, r, s);
  return xk_base(k, xk_owner(k, r), r.btype) + (pkt ? 2 * off : off);
}

/* Address of a switch ref's range + s in member g of its group. */
__device__ __forceinline__ char* xk_sw_ptr(const xk& k, const plan_ref& r, int g, uint64_t s, int pkt) {
  int owner = k.P->sw_ranks[k.P->sw_off[r.sw] + g];
  uint64_t off = xk_off(k, r, s);
  return xk_base(k, owner, r.btype) + (pkt ? 2 * off : off);
}

__device__ __forceinline__ int xk_sw_size(const xk& k, const plan_ref& r) { return k.P->sw_n[r.sw]; }

/* Records that this thread's part of the op failed (what: a MSCCLPP_DEVICE_* code; peer: the rank
 * waited for, -1 unknown): stops the block after the op, and fills the call's error record if no
 * other block did. The claim decides who is first; the winner writes the fields, then stores flag
 * = 1 with release at system scope, so the host that acquire-loads flag == 1 sees every field. */
__device__ __noinline__ void xk_fail(const xk& k, int what, int peer) {
  *k.rc = what;
  if (atomicCAS(&k.P->words->claim, 0u, 1u) != 0u) return;
  xg_err* e = k.P->err;
  e->block = (int32_t)k.b;
  e->op = (int32_t)k.op_index;
  e->code = k.code;
  e->peer = peer;
  e->what = what;
  e->plan_id = k.P->plan_id;
  e->launch = k.launch;
  mscclppStoreRelease32(&e->flag, 1);
}

/* ---- packets: a unit is U payload bytes (8, or 4 for LL8 with elements of 4 bytes or less); it
 * sits at 2 * U bytes per unit from the packet base (one LL16, one or two LL8 packets). -------- */

/* Units of U bytes (4 or 8) that hold n bytes: a shift, where n / U would be a 64-bit division by
 * a variable (a call of a hundred instructions, at every op). */
__device__ __forceinline__ uint64_t xk_units(uint64_t n, uint32_t U) { return (n + U - 1) >> (U == 8 ? 3 : 2); }

/* The payload unit of plain packet ops. */
__device__ __forceinline__ uint32_t xk_unit(const xk& k) { return k.pkt == 8 ? 4u : 8u; }

/* Writes unit u (len <= U valid bytes of v) as packets at base. */
__device__ __forceinline__ void xk_pk_write(const xk& k, char* base, uint64_t u, uint32_t U, uint64_t v, uint32_t len) {
  if (k.pkt != 8) {
    mscclppLL16Write((mscclppLL16Packet*)base + u, v, k.flag);
  } else if (U == 4) {
    mscclppLL8Write((mscclppLL8Packet*)base + u, (uint32_t)v, k.flag);
  } else {
    mscclppLL8Write((mscclppLL8Packet*)base + 2 * u, (uint32_t)v, k.flag);
    if (len > 4) mscclppLL8Write((mscclppLL8Packet*)base + 2 * u + 1, (uint32_t)(v >> 32), k.flag);
  }
}

/* Waits (bounded) for unit u's packets at base to carry this call's flag; *v gets the payload. */
__device__ __forceinline__ int xk_pk_read(const xk& k, const char* base, uint64_t u, uint32_t U, uint32_t len,
                                          uint64_t* v) {
  const mscclppWaitInfo* w = &k.P->wait;
  if (k.pkt != 8) return mscclppLL16Read((const mscclppLL16Packet*)base + u, k.flag, v, w);
  uint32_t lo = 0, hi = 0;
  const mscclppLL8Packet* p = (const mscclppLL8Packet*)base + (U == 4 ? u : 2 * u);
  int rc = mscclppLL8Read(p, k.flag, &lo, w);
  if (rc == MSCCLPP_DEVICE_OK && U == 8 && len > 4) rc = mscclppLL8Read(p + 1, k.flag, &hi, w);
  *v = (uint64_t)lo | ((uint64_t)hi << 32);
  return rc;
}

/* The low len bytes of v (packets carry zero padding past the data). */
__device__ __forceinline__ uint64_t xk_mask(uint64_t v, uint32_t len) { return len >= 8 ? v : v & ((1ull << (8 * len)) - 1); }

#endif /* MPP_EXEC_GPU_K_COMMON_CUH_ */
