/* mscclpp/fifo.h - the proxy FIFO: many producers (GPU threads, or host threads of a CPU rank)
 * push 16-byte triggers, one consumer (the proxy thread) polls and pops them in order. The same
 * code runs on both sides (CUDA atomics and fences on the GPU, __atomic builtins on the host).
 * Compiles as C11, C++ and CUDA C++.
 *
 * Memory (made by the proxy service; see src/proxy/fifo_host.c):
 *   triggers   size slots of 16 bytes. GPU ranks: host-pinned memory mapped into the GPU, so the
 *              proxy polls its own RAM and the GPU writes over PCIe. CPU ranks: host memory.
 *   head       the number of slots claimed so far. GPU ranks: device memory (a GPU atomic).
 *   tail       the number of slots the proxy has consumed, stored by the proxy after every pop.
 *              Host memory (mapped into the GPU for GPU ranks): the proxy never needs a CUDA call
 *              for the FIFO (a copy into device memory issued while kernels spin can be queued
 *              behind the very kernel that waits for it: measured on H200).
 *   tailCache  GPU ranks: a copy of tail in device memory that producers read first (an L2 hit
 *              instead of a PCIe read); a producer that had to read the real tail stores what it
 *              saw there. CPU ranks: the tail itself.
 *
 * Protocol. A producer claims slot number h = head++ (fetch-add: distinct h per push), waits until
 * h - tail < size (the slot's previous occupant, h - size, has been consumed), makes its earlier
 * writes visible system-wide when the trigger copies data, then writes both words of the slot.
 * Each word carries a valid bit, so the consumer takes the slot only when both halves have
 * landed: the two 8-byte halves need not arrive together or in order. The consumer handles the
 * trigger, zeroes the slot and stores the new tail (both release). A flush waits until its slot
 * reads zero again, or the tail has passed it (then the slot may already hold a newer trigger).
 *
 * Why a stale tail is safe: the tail only grows, so an old value (tailCache, or a racing
 * producer's older store into it) makes a producer think fewer slots are free than really are; it
 * then reads the real tail and waits longer, it never overwrites a slot the proxy has not
 * consumed. Counters are 64-bit and compared by unsigned difference, so they may wrap. */
#ifndef MSCCLPP_FIFO_H_
#define MSCCLPP_FIFO_H_

#include <stdint.h>

#include <mscclpp/atomics.h>
#include <mscclpp/device.h>
#include <mscclpp/wait.h>

#ifdef __cplusplus
#define MSCCLPP_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define MSCCLPP_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

/* Trigger types (bits; a trigger may carry several, handled in this order). */
#define MSCCLPP_TRIGGER_DATA 0x1u /* copy size bytes from the port's src+srcOffset to its dst+dstOffset */
#define MSCCLPP_TRIGGER_FLAG 0x2u /* signal the port's semaphore, after every earlier copy of the port */
#define MSCCLPP_TRIGGER_SYNC 0x4u /* flush the port's connection; the pusher observes completion */

/* Trigger layout (bit ranges of the two 64-bit words, low bit first):
 *   fst: [0,38) dstOffset  [38,60) size bits 0..21   [60,63) type        [63] valid = 1
 *   snd: [0,38) srcOffset  [38,49) size bits 22..32  [49,63) port id     [63] valid = 1
 * Offsets reach 256 GiB, one trigger moves < 8 GiB (larger puts are split into several), a proxy
 * serves 16384 ports. A zeroed slot is empty. */
#define MSCCLPP_TRIGGER_OFFSET_BITS 38
#define MSCCLPP_TRIGGER_SIZE_LO_BITS 22
#define MSCCLPP_TRIGGER_SIZE_HI_BITS 11
#define MSCCLPP_TRIGGER_TYPE_BITS 3
#define MSCCLPP_TRIGGER_PORT_BITS 14
#define MSCCLPP_TRIGGER_VALID (1ull << 63)
#define MSCCLPP_TRIGGER_MAX_OFFSET ((1ull << MSCCLPP_TRIGGER_OFFSET_BITS) - 1)
#define MSCCLPP_TRIGGER_MAX_SIZE ((1ull << (MSCCLPP_TRIGGER_SIZE_LO_BITS + MSCCLPP_TRIGGER_SIZE_HI_BITS)) - 1)
#define MSCCLPP_TRIGGER_MAX_PORTS (1u << MSCCLPP_TRIGGER_PORT_BITS)
/* The largest piece a put is split into: a round power of two below the maximum size. */
#define MSCCLPP_TRIGGER_CHUNK (1ull << 32)

typedef struct MSCCLPP_ALIGN(16) {
  uint64_t fst;
  uint64_t snd;
} mscclppTrigger;

MSCCLPP_STATIC_ASSERT(sizeof(mscclppTrigger) == 16, "a trigger is 16 bytes");
MSCCLPP_STATIC_ASSERT(MSCCLPP_TRIGGER_OFFSET_BITS + MSCCLPP_TRIGGER_SIZE_LO_BITS + MSCCLPP_TRIGGER_TYPE_BITS + 1 == 64,
                      "fst is dstOffset, size low bits, type and the valid bit");
MSCCLPP_STATIC_ASSERT(MSCCLPP_TRIGGER_OFFSET_BITS + MSCCLPP_TRIGGER_SIZE_HI_BITS + MSCCLPP_TRIGGER_PORT_BITS + 1 == 64,
                      "snd is srcOffset, size high bits, port and the valid bit");
MSCCLPP_STATIC_ASSERT(MSCCLPP_TRIGGER_CHUNK <= MSCCLPP_TRIGGER_MAX_SIZE, "a put chunk fits one trigger");

#define MSCCLPP_TRIGGER_OFFSET_MASK MSCCLPP_TRIGGER_MAX_OFFSET
#define MSCCLPP_TRIGGER_SIZE_LO_MASK ((1ull << MSCCLPP_TRIGGER_SIZE_LO_BITS) - 1)

/* Builds a trigger. Fields wider than their bits are cut (callers keep within the limits above). */
MSCCLPP_HOST_DEVICE_INLINE mscclppTrigger mscclppTriggerMake(uint32_t type, uint32_t port, uint64_t dstOffset,
                                                            uint64_t srcOffset, uint64_t size) {
  mscclppTrigger t;
  t.fst = MSCCLPP_TRIGGER_VALID | ((uint64_t)(type & 7u) << 60) | ((size & MSCCLPP_TRIGGER_SIZE_LO_MASK) << 38) |
          (dstOffset & MSCCLPP_TRIGGER_OFFSET_MASK);
  t.snd = MSCCLPP_TRIGGER_VALID | ((uint64_t)(port & (MSCCLPP_TRIGGER_MAX_PORTS - 1)) << 49) |
          (((size >> MSCCLPP_TRIGGER_SIZE_LO_BITS) & ((1ull << MSCCLPP_TRIGGER_SIZE_HI_BITS) - 1)) << 38) |
          (srcOffset & MSCCLPP_TRIGGER_OFFSET_MASK);
  return t;
}

MSCCLPP_HOST_DEVICE_INLINE uint32_t mscclppTriggerType(mscclppTrigger t) { return (uint32_t)(t.fst >> 60) & 7u; }
MSCCLPP_HOST_DEVICE_INLINE uint32_t mscclppTriggerPort(mscclppTrigger t) {
  return (uint32_t)(t.snd >> 49) & (MSCCLPP_TRIGGER_MAX_PORTS - 1);
}
MSCCLPP_HOST_DEVICE_INLINE uint64_t mscclppTriggerDstOffset(mscclppTrigger t) { return t.fst & MSCCLPP_TRIGGER_OFFSET_MASK; }
MSCCLPP_HOST_DEVICE_INLINE uint64_t mscclppTriggerSrcOffset(mscclppTrigger t) { return t.snd & MSCCLPP_TRIGGER_OFFSET_MASK; }
MSCCLPP_HOST_DEVICE_INLINE uint64_t mscclppTriggerSize(mscclppTrigger t) {
  return ((t.fst >> 38) & MSCCLPP_TRIGGER_SIZE_LO_MASK) |
         (((t.snd >> 38) & ((1ull << MSCCLPP_TRIGGER_SIZE_HI_BITS) - 1)) << MSCCLPP_TRIGGER_SIZE_LO_BITS);
}

/* The producers' view of a FIFO (passed to kernels by value). */
typedef struct {
  mscclppTrigger* triggers; /* size slots */
  uint64_t* head;           /* slots claimed */
  uint64_t* tail;           /* slots consumed (the proxy's; host memory) */
  uint64_t* tailCache;      /* a lower bound of tail kept by producers (GPU ranks: device memory) */
  uint32_t size;            /* slots, a power of two */
  uint32_t pad;
  mscclppWaitInfo wait;     /* FifoFull / FifoSync timeouts are reported with these ids */
} mscclppFifoDevice;

/* Pushes t from one thread (any number of threads or blocks may push at once). *seq receives the
 * slot number, for mscclppFifoSync. Returns MSCCLPP_DEVICE_OK, or TIMEOUT/ABORTED when no slot
 * came free within the bound (the claimed slot then stays unwritten: the proxy waits on it, so the
 * FIFO is unusable until the rank's channels are made again). */
MSCCLPP_HOST_DEVICE_INLINE int mscclppFifoPush(const mscclppFifoDevice* f, mscclppTrigger t, uint64_t* seq) {
  uint64_t h = mscclppFetchAddGpu64(f->head, 1);
  /* Acquire (every tail load): the consumer zeroed slot h - size before storing a tail past it;
   * our writes of the slot below come after that. */
  uint64_t tail = mscclppLoadAcquire64(f->tailCache);
  if (h - tail >= f->size) {
    /* Full: spin on the cache, and read the real tail (host memory: a PCIe read for GPU ranks) at
     * most once a microsecond per thread, so that hundreds of waiting producers do not flood the
     * bus that the proxy's copies and the GPU's command fetches also need. Whoever reads a newer
     * tail stores it in the cache. Release: a producer that takes a value from the cache inherits
     * what its reader acquired; every value stored is a tail the proxy reached, so racing stores
     * are all safe (an older one only costs another read). */
    mscclppSpin s = MSCCLPP_SPIN_INIT;
    uint64_t last_read = 0;
    for (;;) {
      uint64_t now = mscclppNowNs();
      if (now - last_read >= 1000) {
        last_read = now;
        uint64_t cached = tail;
        tail = mscclppLoadAcquire64(f->tail);
        if (f->tailCache != f->tail && tail - cached - 1 < (1ull << 63)) mscclppStoreRelease64(f->tailCache, tail);
      } else {
        tail = mscclppLoadAcquire64(f->tailCache);
      }
      if (h - tail < f->size) break;
      int rc = mscclppSpinCheck(&s, &f->wait, mscclppWaitFifoFull, h - f->size + 1, tail);
      if (rc != MSCCLPP_DEVICE_OK) return rc;
    }
  }
  mscclppTrigger* slot = &f->triggers[h & (f->size - 1)];
  /* Triggers that copy data: a system-wide fence, so that every write of this thread (and of the
   * threads it synchronized with) before the push - the data the put copies - is visible to the
   * copy engine or host thread the proxy drives before the proxy can see the trigger. Signals and
   * flushes skip it (about 0.6 us on H200): they order only the puts pushed before them, which the
   * FIFO keeps in order and whose pushes fenced their own data. */
  if (mscclppTriggerType(t) & MSCCLPP_TRIGGER_DATA) mscclppFenceSys();
#if MSCCLPP_ON_DEVICE
  /* One 16-byte store; the valid bits make its halves self-checking should they land apart. */
  asm volatile("st.volatile.v2.u64 [%0], {%1, %2};" ::"l"(slot), "l"(t.fst), "l"(t.snd) : "memory");
#else
  mscclppStoreRelaxed64(&slot->snd, t.snd);
  mscclppStoreRelaxed64(&slot->fst, t.fst);
#endif
  *seq = h;
  return MSCCLPP_DEVICE_OK;
}

/* Waits until the proxy has handled the trigger pushed as slot number seq (its slot reads zero,
 * or the tail passed it). Acquire: what the proxy did for it - a completed flush - is
 * visible once this returns OK. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppFifoSync(const mscclppFifoDevice* f, uint64_t seq) {
  const mscclppTrigger* slot = &f->triggers[seq & (f->size - 1)];
  mscclppSpin s = MSCCLPP_SPIN_INIT;
  for (;;) {
    if (mscclppLoadAcquire64(&slot->fst) == 0) return MSCCLPP_DEVICE_OK;
    uint64_t tail = mscclppLoadAcquire64(f->tail);
    if (tail - seq - 1 < (1ull << 63)) return MSCCLPP_DEVICE_OK; /* tail > seq, wrap-safe */
    int rc = mscclppSpinCheck(&s, &f->wait, mscclppWaitFifoSync, seq + 1, tail);
    if (rc != MSCCLPP_DEVICE_OK) return rc;
  }
}

/* The consumer's view (the proxy thread; host code). */
typedef struct {
  mscclppTrigger* triggers;
  uint64_t* tailOut; /* where producers read the tail (mscclppFifoDevice.tail, host view) */
  uint32_t size;
  uint32_t pad;
  uint64_t tail;     /* next slot number to consume */
} mscclppFifoConsumer;

/* Copies the trigger at the tail into *out and returns 1 when both of its halves have landed;
 * returns 0 (nothing consumed) otherwise. Acquire: the producer's writes before its push are
 * visible to the handler. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppFifoPoll(const mscclppFifoConsumer* c, mscclppTrigger* out) {
  mscclppTrigger* slot = &c->triggers[c->tail & (c->size - 1)];
  uint64_t fst = mscclppLoadAcquire64(&slot->fst);
  if (!(fst & MSCCLPP_TRIGGER_VALID)) return 0;
  uint64_t snd = mscclppLoadAcquire64(&slot->snd);
  if (!(snd & MSCCLPP_TRIGGER_VALID)) return 0;
  out->fst = fst;
  out->snd = snd;
  return 1;
}

/* Retires the trigger at the tail after it was handled: zeroes the slot and stores the new tail
 * where producers read it. Release (both stores): a flush waiter that sees the zero, and a
 * producer that sees the tail, also see what handling the trigger did and the zeroed slot. */
MSCCLPP_HOST_DEVICE_INLINE void mscclppFifoPop(mscclppFifoConsumer* c) {
  mscclppTrigger* slot = &c->triggers[c->tail & (c->size - 1)];
  mscclppStoreRelaxed64(&slot->snd, 0);
  mscclppStoreRelease64(&slot->fst, 0);
  c->tail++;
  mscclppStoreRelease64(c->tailOut, c->tail);
}

#endif /* MSCCLPP_FIFO_H_ */
