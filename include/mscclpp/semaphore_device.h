/* mscclpp/semaphore_device.h - semaphores that GPU threads (and host threads of CPU ranks) signal
 * and wait on without the host in the loop. Compiles as C11, C++ and CUDA C++.
 *
 * A semaphore is a pair of 64-bit monotonic tokens, one in each rank's own memory ("inbound").
 * A signal adds one to the peer's inbound token; the n-th wait of this side returns once its own
 * inbound token reaches n. Each side counts the steps its waits consumed in "expected", a word of
 * its own memory. Both counters are changed with atomics, so several threads or blocks may signal
 * and wait on one semaphore at once: every signal counts, and every wait consumes a distinct
 * step (which thread gets which step is unspecified).
 *
 * - mscclppMemoryDevSemaphore (memory channels): the peer's GPU (or host thread) adds to our token
 *   directly through peer memory (NVLink/PCIe mapping, or shared host memory).
 * - mscclppHostDevSemaphore (port channels): the peer's proxy thread stores the peer's signal count
 *   into our token through the connection, after the data the peer's proxy copied before. Only
 *   the wait side lives here; signals go through the FIFO (port_channel.h).
 *
 * Waits are bounded by the handle's wait info (wait.h). A wait that returns TIMEOUT or ABORTED has
 * consumed its step: the semaphore is out of step from then on and must be made again. */
#ifndef MSCCLPP_SEMAPHORE_DEVICE_H_
#define MSCCLPP_SEMAPHORE_DEVICE_H_

#include <stdint.h>

#include <mscclpp/atomics.h>
#include <mscclpp/device.h>
#include <mscclpp/wait.h>

typedef struct {
  uint64_t* inbound;       /* our token (our memory): the peer adds one per signal */
  uint64_t* expected;      /* steps our waits consumed (our memory) */
  uint64_t* remoteInbound; /* the peer's token, mapped here */
  uint64_t pad;
  mscclppWaitInfo wait;
} mscclppMemoryDevSemaphore;

typedef struct {
  uint64_t* inbound;  /* our token (our memory): the peer's proxy stores its signal count */
  uint64_t* expected; /* steps our waits consumed (our memory) */
  mscclppWaitInfo wait;
} mscclppHostDevSemaphore;

/* True when token value v has reached step e (wrap-safe: they never drift 2^63 apart). */
MSCCLPP_HOST_DEVICE_INLINE int mscclppTokenReached(uint64_t v, uint64_t e) { return v - e < (1ull << 63); }

/* The wait both kinds share: takes the next step and spins until the token reaches it. acquire
 * != 0 orders what the signaller wrote before its signal before everything this thread does
 * after the wait; 0 only counts. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppTokenWait(uint64_t* inbound, uint64_t* expected, const mscclppWaitInfo* w,
                                                int acquire) {
  uint64_t e = mscclppFetchAddGpu64(expected, 1) + 1;
  mscclppSpin s = MSCCLPP_SPIN_INIT;
  for (;;) {
    /* Poll with relaxed loads (an acquire load per poll costs more on the GPU); once the step is
     * there, one acquire load of the token - it reads the signaller's release or a later value of
     * the same token - orders the signaller's earlier writes before what this thread does next. */
    uint64_t v = mscclppLoadRelaxed64(inbound);
    if (mscclppTokenReached(v, e)) {
      if (acquire) (void)mscclppLoadAcquire64(inbound);
      return MSCCLPP_DEVICE_OK;
    }
    int rc = mscclppSpinCheck(&s, w, mscclppWaitSemaphore, e, v);
    if (rc != MSCCLPP_DEVICE_OK) return rc;
  }
}

/* Non-blocking wait: 1 (and the step consumed, with acquire order) when the next step has been
 * signalled, else 0. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppTokenPoll(uint64_t* inbound, uint64_t* expected) {
  uint64_t e = mscclppLoadRelaxed64(expected);
  uint64_t v = mscclppLoadAcquire64(inbound);
  if (!mscclppTokenReached(v, e + 1)) return 0;
  return mscclppCasGpu64(expected, e, e + 1) == e;
}

/* ---- memory-channel semaphores ---------------------------------------------------------------- */

/* Release: the calling thread's earlier writes (and those of threads it synchronized with first,
 * e.g. through __syncthreads) are visible to the peer once its wait for this step returns. */
MSCCLPP_HOST_DEVICE_INLINE void mscclppMemoryDevSemaphoreSignal(const mscclppMemoryDevSemaphore* s) {
  mscclppAddRelease64(s->remoteInbound, 1);
}
/* Counts a step without ordering any data (pair with an explicit fence or with relaxedWait). */
MSCCLPP_HOST_DEVICE_INLINE void mscclppMemoryDevSemaphoreRelaxedSignal(const mscclppMemoryDevSemaphore* s) {
  mscclppAddRelaxed64(s->remoteInbound, 1);
}
/* Waits for the peer's next step (acquire: what the peer wrote before signalling it is visible). */
MSCCLPP_HOST_DEVICE_INLINE int mscclppMemoryDevSemaphoreWait(const mscclppMemoryDevSemaphore* s) {
  return mscclppTokenWait(s->inbound, s->expected, &s->wait, 1);
}
MSCCLPP_HOST_DEVICE_INLINE int mscclppMemoryDevSemaphoreRelaxedWait(const mscclppMemoryDevSemaphore* s) {
  return mscclppTokenWait(s->inbound, s->expected, &s->wait, 0);
}
MSCCLPP_HOST_DEVICE_INLINE int mscclppMemoryDevSemaphorePoll(const mscclppMemoryDevSemaphore* s) {
  return mscclppTokenPoll(s->inbound, s->expected);
}

/* ---- host-to-device semaphores (the wait side of port channels) ------------------------------- */

MSCCLPP_HOST_DEVICE_INLINE int mscclppHostDevSemaphoreWait(const mscclppHostDevSemaphore* s) {
  return mscclppTokenWait(s->inbound, s->expected, &s->wait, 1);
}
MSCCLPP_HOST_DEVICE_INLINE int mscclppHostDevSemaphorePoll(const mscclppHostDevSemaphore* s) {
  return mscclppTokenPoll(s->inbound, s->expected);
}

#endif /* MSCCLPP_SEMAPHORE_DEVICE_H_ */
