/* switch_host.c - the host counterparts of the switch channels' device functions (declared in
 * mscclpp/switch_channel.h), for host threads of CPU ranks. The arithmetic is the CPU ranks' own
 * reduction (elem_reduce, from the element layer below). Plain loads and stores: ordering is the
 * caller's. */
#include <mscclpp/switch_channel.h>

#include <stdint.h>
#include <string.h>

#include "elem/reduce.h"
#include "util/err.h"

/* ReduceBroadcast reduces and copies this many bytes at a time, so that the result is still in
 * cache when it is copied to the other members. */
#define RB_CHUNK_BYTES (64u << 10)

/* What a datatype and operator come to: element size, byte count of the range, elem_reduce's op. */
struct elems {
  size_t size;
  uint64_t bytes;
  enum elem_op op;
};

/* Checks dtype, op and that count elements fit in 64 bits of bytes; fills *e. */
static mscclppResult_t check_elems(const char* fn, uint64_t count, mscclppDataType_t dtype, mscclppSwitchOp_t op,
                                   struct elems* e) {
  e->size = (int)dtype >= 0 && (int)dtype < mscclppNumTypes ? elem_dtype_size((int)dtype) : 0;
  MPP_CHECK_ARG(e->size != 0, "%s: dtype %d is not a valid mscclppDataType_t (0..%d)", fn, (int)dtype,
                (int)mscclppNumTypes - 1);
  switch (op) {
    case mscclppSwitchSum: e->op = ELEM_OP_SUM; break;
    case mscclppSwitchMin: e->op = ELEM_OP_MIN; break;
    case mscclppSwitchMax: e->op = ELEM_OP_MAX; break;
    default:
      return MPP_ERR(mscclppInvalidArgument, "%s: op %d is not a mscclppSwitchOp_t (Sum 0, Min 1, Max 2)", fn, (int)op);
  }
  MPP_CHECK_ARG(count <= UINT64_MAX / e->size, "%s: count %llu of %zu-byte elements overflows a 64-bit byte count", fn,
                (unsigned long long)count, e->size);
  e->bytes = count * e->size;
  return mscclppSuccess;
}

/* Checks the channel (1..MSCCLPP_SWITCH_MAX_RANKS members, each mapped), that every member's
 * [offset, offset + bytes) lies inside the address space, and the thread split. */
static mscclppResult_t check_channel(const char* fn, const mscclppSwitchChannel* ch, uint64_t offset, uint64_t bytes,
                                     uint32_t tid, uint32_t nthreads) {
  MPP_CHECK_ARG(ch != NULL, "%s: channel is NULL", fn);
  MPP_CHECK_ARG(ch->nranks >= 1 && ch->nranks <= MSCCLPP_SWITCH_MAX_RANKS,
                "%s: channel has %d members (1..%d; not made by mscclppSwitchChannelCreate?)", fn, (int)ch->nranks,
                MSCCLPP_SWITCH_MAX_RANKS);
  MPP_CHECK_ARG(nthreads >= 1 && tid < nthreads, "%s: tid %u is not below nthreads %u", fn, tid, nthreads);
  MPP_CHECK_ARG(offset <= UINT64_MAX - bytes, "%s: offset %llu + %llu bytes overflows", fn, (unsigned long long)offset,
                (unsigned long long)bytes);
  for (int r = 0; r < ch->nranks; r++) {
    MPP_CHECK_ARG(ch->peers[r] != NULL, "%s: member %d's buffer is NULL", fn, r);
    MPP_CHECK_ARG(offset + bytes <= UINTPTR_MAX - (uintptr_t)ch->peers[r],
                  "%s: member %d's range (offset %llu, %llu bytes) runs past the end of the address space", fn, r,
                  (unsigned long long)offset, (unsigned long long)bytes);
  }
  return mscclppSuccess;
}

/* Fails when the local buffer p (bytes long; what = "dst" or "src") wraps around the address space
 * or partly overlaps a member's range; equal to one exactly is allowed (the callers handle that). */
static mscclppResult_t check_overlap(const char* fn, const char* what, const mscclppSwitchChannel* ch, const void* p,
                                     uint64_t offset, uint64_t bytes) {
  uintptr_t a = (uintptr_t)p;
  MPP_CHECK_ARG(bytes <= UINTPTR_MAX - a, "%s: %s + %llu bytes runs past the end of the address space", fn, what,
                (unsigned long long)bytes);
  for (int r = 0; r < ch->nranks && bytes > 0; r++) {
    uintptr_t m = (uintptr_t)ch->peers[r] + (uintptr_t)offset;
    MPP_CHECK_ARG(a == m || a >= m + bytes || m >= a + bytes, "%s: %s partly overlaps member %d's range", fn, what, r);
  }
  return mscclppSuccess;
}

/* Thread tid's contiguous share of n items, as even as possible: returns its length and its first
 * item through *first (never overflows). */
static uint64_t thread_share(uint64_t n, uint32_t tid, uint32_t nthreads, uint64_t* first) {
  uint64_t base = n / nthreads, extra = n % nthreads;
  *first = base * tid + (tid < extra ? tid : extra);
  return base + (tid < extra ? 1 : 0);
}

/* The checks of a reduction (check_elems, check_channel) and thread tid's share of the count:
 * its first element (*first) and its length (*n). */
static mscclppResult_t check_reduce(const char* fn, const mscclppSwitchChannel* ch, uint64_t offset, uint64_t count,
                                    mscclppDataType_t dtype, mscclppSwitchOp_t op, uint32_t tid, uint32_t nthreads,
                                    struct elems* e, uint64_t* first, uint64_t* n) {
  MPP_CHECK(check_elems(fn, count, dtype, op, e));
  MPP_CHECK(check_channel(fn, ch, offset, e->bytes, tid, nthreads));
  *n = thread_share(count, tid, nthreads, first);
  return mscclppSuccess;
}

/* srcs[r] = member r's buffer + at. */
static void member_ptrs(const mscclppSwitchChannel* ch, uint64_t at, const void** srcs) {
  for (int r = 0; r < ch->nranks; r++) srcs[r] = (const char*)ch->peers[r] + at;
}

mscclppResult_t mscclppSwitchChannelReduceHost(const mscclppSwitchChannel* ch, void* dst, uint64_t offset,
                                               uint64_t count, mscclppDataType_t dtype, mscclppSwitchOp_t op,
                                               uint32_t tid, uint32_t nthreads) {
  static const char fn[] = "mscclppSwitchChannelReduceHost";
  err_clear();
  struct elems e;
  uint64_t first, n;
  MPP_CHECK(check_reduce(fn, ch, offset, count, dtype, op, tid, nthreads, &e, &first, &n));
  MPP_CHECK_ARG(dst != NULL, "%s: dst is NULL", fn);
  MPP_CHECK(check_overlap(fn, "dst", ch, dst, offset, e.bytes));
  if (n == 0) return mscclppSuccess;
  const void* srcs[MSCCLPP_SWITCH_MAX_RANKS];
  member_ptrs(ch, offset + first * e.size, srcs);
  /* dst equal to one member's range is one of elem_reduce's sources exactly: allowed there. */
  elem_reduce((char*)dst + first * e.size, srcs, ch->nranks, (size_t)n, (int)dtype, e.op, ch->nranks, NULL);
  return mscclppSuccess;
}

mscclppResult_t mscclppSwitchChannelBroadcastHost(const mscclppSwitchChannel* ch, const void* src, uint64_t offset,
                                                  uint64_t bytes, uint32_t tid, uint32_t nthreads) {
  static const char fn[] = "mscclppSwitchChannelBroadcastHost";
  err_clear();
  MPP_CHECK(check_channel(fn, ch, offset, bytes, tid, nthreads));
  MPP_CHECK_ARG(src != NULL, "%s: src is NULL", fn);
  MPP_CHECK(check_overlap(fn, "src", ch, src, offset, bytes));
  uint64_t first, n = thread_share(bytes, tid, nthreads, &first);
  for (int r = 0; r < ch->nranks && n > 0; r++) {
    char* d = (char*)ch->peers[r] + offset;
    if (d != (const char*)src) /* src may be this member's own range: nothing to copy there */
      memcpy(d + first, (const char*)src + first, (size_t)n);
  }
  return mscclppSuccess;
}

mscclppResult_t mscclppSwitchChannelReduceBroadcastHost(const mscclppSwitchChannel* ch, uint64_t offset,
                                                        uint64_t count, mscclppDataType_t dtype, mscclppSwitchOp_t op,
                                                        uint32_t tid, uint32_t nthreads) {
  static const char fn[] = "mscclppSwitchChannelReduceBroadcastHost";
  err_clear();
  struct elems e;
  uint64_t first, n;
  MPP_CHECK(check_reduce(fn, ch, offset, count, dtype, op, tid, nthreads, &e, &first, &n));
  uint64_t step = RB_CHUNK_BYTES / e.size;
  const void* srcs[MSCCLPP_SWITCH_MAX_RANKS];
  for (uint64_t done = 0; done < n; done += step) {
    uint64_t k = n - done < step ? n - done : step, at = offset + (first + done) * e.size;
    member_ptrs(ch, at, srcs);
    /* Into member 0's range (exactly one of the sources), then from there to the others. */
    elem_reduce((char*)ch->peers[0] + at, srcs, ch->nranks, (size_t)k, (int)dtype, e.op, ch->nranks, NULL);
    for (int r = 1; r < ch->nranks; r++)
      if (ch->peers[r] != ch->peers[0]) memcpy((char*)ch->peers[r] + at, srcs[0], (size_t)(k * e.size));
  }
  return mscclppSuccess;
}
