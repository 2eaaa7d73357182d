/* mscclpp/packet.h - LL ("low latency") packets: data that carries its own readiness flag, so the
 * receiver needs no separate signal. Compiles as C11, C++ and CUDA C++.
 *
 *   LL16: 16 bytes = {data1 u32, flag1 u32, data2 u32, flag2 u32}: 8 payload bytes, written and
 *         read as one 16-byte volatile access; valid when both flags equal the expected flag.
 *   LL8:  8 bytes = {data u32, flag u32}: 4 payload bytes, one 8-byte volatile access.
 * Each 8-byte half {data, flag} is stored as one aligned 64-bit word, so a half never tears;
 * LL16 checks both halves' flags, so the two halves may even land apart (host threads write them
 * as two 64-bit stores). The words are kept as uint64_t (little endian: data in the low half).
 *
 * Flags. A packet buffer's slots are reused by every launch, so a reader must never take an old
 * packet for a new one: each use of a buffer writes a flag no earlier use of it wrote, and never
 * 0 (a zeroed buffer must not look valid). mscclppPacketFlagNext makes such flags from a counter
 * that lives as long as the buffer (it wraps after 2^32 - 1 uses). A slot may be written again
 * only after its reader consumed it: alternate two halves of the buffer between launches
 * ("double scratch") or put a semaphore round between the uses. */
#ifndef MSCCLPP_PACKET_H_
#define MSCCLPP_PACKET_H_

#include <stdint.h>

#include <mscclpp/atomics.h>
#include <mscclpp/device.h>
#include <mscclpp/wait.h>

typedef struct MSCCLPP_ALIGN(16) {
  uint64_t lo; /* data1 | flag1 << 32 */
  uint64_t hi; /* data2 | flag2 << 32 */
} mscclppLL16Packet;

typedef struct MSCCLPP_ALIGN(8) {
  uint64_t word; /* data | flag << 32 */
} mscclppLL8Packet;

#define MSCCLPP_LL16_PAYLOAD 8u
#define MSCCLPP_LL8_PAYLOAD 4u

/* Packet bytes needed for `bytes` of data. */
MSCCLPP_HOST_DEVICE_INLINE uint64_t mscclppLL16Bytes(uint64_t bytes) { return (bytes + 7) / 8 * 16; }
MSCCLPP_HOST_DEVICE_INLINE uint64_t mscclppLL8Bytes(uint64_t bytes) { return (bytes + 3) / 4 * 8; }

/* The flag of the next use of a buffer whose uses *counter counts: counter + 1, never 0. */
MSCCLPP_HOST_DEVICE_INLINE uint32_t mscclppPacketFlagNext(uint32_t* counter) {
  uint32_t f = *counter + 1;
  if (f == 0) f = 1;
  *counter = f;
  return f;
}

/* ---- single packets ---------------------------------------------------------------------------- */

/* Writes one LL16 packet carrying 8 payload bytes (payload byte i = bits 8i..8i+7). */
MSCCLPP_HOST_DEVICE_INLINE void mscclppLL16Write(mscclppLL16Packet* p, uint64_t payload, uint32_t flag) {
  uint64_t lo = (payload & 0xffffffffull) | ((uint64_t)flag << 32);
  uint64_t hi = (payload >> 32) | ((uint64_t)flag << 32);
#if MSCCLPP_ON_DEVICE
  asm volatile("st.volatile.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(lo), "l"(hi) : "memory");
#else
  mscclppStoreRelaxed64(&p->lo, lo);
  mscclppStoreRelaxed64(&p->hi, hi);
#endif
}

/* One look at an LL16 packet: 1 and *payload when both flags equal flag, else 0. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppLL16Try(const mscclppLL16Packet* p, uint32_t flag, uint64_t* payload) {
  uint64_t lo, hi;
#if MSCCLPP_ON_DEVICE
  asm volatile("ld.volatile.v2.u64 {%0, %1}, [%2];" : "=l"(lo), "=l"(hi) : "l"(p) : "memory");
#else
  lo = mscclppLoadRelaxed64(&p->lo);
  hi = mscclppLoadRelaxed64(&p->hi);
#endif
  if ((uint32_t)(lo >> 32) != flag || (uint32_t)(hi >> 32) != flag) return 0;
  *payload = (lo & 0xffffffffull) | (hi << 32);
  return 1;
}

/* Spins (bounded by w) until the packet carries flag; returns MSCCLPP_DEVICE_OK and *payload. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppLL16Read(const mscclppLL16Packet* p, uint32_t flag, uint64_t* payload,
                                               const mscclppWaitInfo* w) {
  mscclppSpin s = MSCCLPP_SPIN_INIT;
  while (!mscclppLL16Try(p, flag, payload)) {
    int rc = mscclppSpinCheck(&s, w, mscclppWaitPacket, flag, (uint64_t)(p->lo >> 32));
    if (rc != MSCCLPP_DEVICE_OK) return rc;
  }
  return MSCCLPP_DEVICE_OK;
}

MSCCLPP_HOST_DEVICE_INLINE void mscclppLL8Write(mscclppLL8Packet* p, uint32_t data, uint32_t flag) {
  uint64_t word = (uint64_t)data | ((uint64_t)flag << 32);
#if MSCCLPP_ON_DEVICE
  asm volatile("st.volatile.u64 [%0], %1;" ::"l"(p), "l"(word) : "memory");
#else
  mscclppStoreRelaxed64(&p->word, word);
#endif
}

MSCCLPP_HOST_DEVICE_INLINE int mscclppLL8Try(const mscclppLL8Packet* p, uint32_t flag, uint32_t* data) {
  uint64_t word;
#if MSCCLPP_ON_DEVICE
  asm volatile("ld.volatile.u64 %0, [%1];" : "=l"(word) : "l"(p) : "memory");
#else
  word = mscclppLoadRelaxed64(&p->word);
#endif
  if ((uint32_t)(word >> 32) != flag) return 0;
  *data = (uint32_t)word;
  return 1;
}

MSCCLPP_HOST_DEVICE_INLINE int mscclppLL8Read(const mscclppLL8Packet* p, uint32_t flag, uint32_t* data,
                                              const mscclppWaitInfo* w) {
  mscclppSpin s = MSCCLPP_SPIN_INIT;
  while (!mscclppLL8Try(p, flag, data)) {
    int rc = mscclppSpinCheck(&s, w, mscclppWaitPacket, flag, (uint64_t)(p->word >> 32));
    if (rc != MSCCLPP_DEVICE_OK) return rc;
  }
  return MSCCLPP_DEVICE_OK;
}

/* ---- payload loads and stores of any alignment ------------------------------------------------- */

/* Loads n <= 8 bytes at p (any alignment) into the low bytes of a word; the rest are zero. */
MSCCLPP_HOST_DEVICE_INLINE uint64_t mscclppLoadBytes(const void* p, uint32_t n) {
  const uint8_t* b = (const uint8_t*)p;
  if (n == 8 && ((uintptr_t)b & 7) == 0) return *(const uint64_t*)b;
  if (n == 4 && ((uintptr_t)b & 3) == 0) return *(const uint32_t*)b;
  uint64_t v = 0;
  for (uint32_t i = 0; i < n; i++) v |= (uint64_t)b[i] << (8 * i);
  return v;
}

/* Stores the low n <= 8 bytes of v at p (any alignment). */
MSCCLPP_HOST_DEVICE_INLINE void mscclppStoreBytes(void* p, uint64_t v, uint32_t n) {
  uint8_t* b = (uint8_t*)p;
  if (n == 8 && ((uintptr_t)b & 7) == 0) {
    *(uint64_t*)b = v;
  } else if (n == 4 && ((uintptr_t)b & 3) == 0) {
    *(uint32_t*)b = (uint32_t)v;
  } else {
    for (uint32_t i = 0; i < n; i++) b[i] = (uint8_t)(v >> (8 * i));
  }
}

/* ---- cooperative packing: thread tid of nthreads handles every nthreads-th packet -------------- */

/* Writes `bytes` of src (any size and alignment) as LL16 packets into pkts (16-byte aligned, e.g.
 * a peer's packet buffer); the last packet is zero-padded. */
MSCCLPP_HOST_DEVICE_INLINE void mscclppPutPacketsLL16(mscclppLL16Packet* pkts, const void* src, uint64_t bytes,
                                                     uint32_t flag, uint32_t tid, uint32_t nthreads) {
  const uint8_t* s = (const uint8_t*)src;
  uint64_t npkts = (bytes + 7) / 8;
  for (uint64_t i = tid; i < npkts; i += nthreads) {
    uint64_t left = bytes - i * 8;
    mscclppLL16Write(&pkts[i], mscclppLoadBytes(s + i * 8, left < 8 ? (uint32_t)left : 8u), flag);
  }
}

/* Waits for the LL16 packets of `bytes` of data carrying flag and writes their payload to dst
 * (any alignment). Returns MSCCLPP_DEVICE_OK, or the first failed wait's code. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppUnpackPacketsLL16(void* dst, const mscclppLL16Packet* pkts, uint64_t bytes,
                                                       uint32_t flag, uint32_t tid, uint32_t nthreads,
                                                       const mscclppWaitInfo* w) {
  uint8_t* d = (uint8_t*)dst;
  uint64_t npkts = (bytes + 7) / 8;
  for (uint64_t i = tid; i < npkts; i += nthreads) {
    uint64_t payload = 0, left = bytes - i * 8;
    int rc = mscclppLL16Read(&pkts[i], flag, &payload, w);
    if (rc != MSCCLPP_DEVICE_OK) return rc;
    mscclppStoreBytes(d + i * 8, payload, left < 8 ? (uint32_t)left : 8u);
  }
  return MSCCLPP_DEVICE_OK;
}

MSCCLPP_HOST_DEVICE_INLINE void mscclppPutPacketsLL8(mscclppLL8Packet* pkts, const void* src, uint64_t bytes,
                                                    uint32_t flag, uint32_t tid, uint32_t nthreads) {
  const uint8_t* s = (const uint8_t*)src;
  uint64_t npkts = (bytes + 3) / 4;
  for (uint64_t i = tid; i < npkts; i += nthreads) {
    uint64_t left = bytes - i * 4;
    mscclppLL8Write(&pkts[i], (uint32_t)mscclppLoadBytes(s + i * 4, left < 4 ? (uint32_t)left : 4u), flag);
  }
}

MSCCLPP_HOST_DEVICE_INLINE int mscclppUnpackPacketsLL8(void* dst, const mscclppLL8Packet* pkts, uint64_t bytes,
                                                      uint32_t flag, uint32_t tid, uint32_t nthreads,
                                                      const mscclppWaitInfo* w) {
  uint8_t* d = (uint8_t*)dst;
  uint64_t npkts = (bytes + 3) / 4;
  for (uint64_t i = tid; i < npkts; i += nthreads) {
    uint32_t data = 0;
    uint64_t left = bytes - i * 4;
    int rc = mscclppLL8Read(&pkts[i], flag, &data, w);
    if (rc != MSCCLPP_DEVICE_OK) return rc;
    mscclppStoreBytes(d + i * 4, data, left < 4 ? (uint32_t)left : 4u);
  }
  return MSCCLPP_DEVICE_OK;
}

#endif /* MSCCLPP_PACKET_H_ */
