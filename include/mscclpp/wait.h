/* mscclpp/wait.h - bounded waits of device-side (and host-thread) code, and how a wait that hit its
 * bound reports itself. Every spin of the FIFO, the semaphores and the packets goes through
 * mscclppSpinCheck: after the handle's timeout it records who waited for whom in the rank's
 * mscclppDeviceError record (first one wins) and returns MSCCLPP_DEVICE_TIMEOUT instead of spinning
 * forever; once any wait of the rank has failed, the others give up with MSCCLPP_DEVICE_ABORTED.
 * Compiles as C11, C++ and CUDA C++. */
#ifndef MSCCLPP_WAIT_H_
#define MSCCLPP_WAIT_H_

#include <stdint.h>

#include <mscclpp/atomics.h>
#include <mscclpp/comm.h>
#include <mscclpp/device.h>

/* Who is waiting, for whom, and for how long at most: carried by every handle that can wait.
 * Filled by the library when the handle is made (see the channel headers). */
typedef struct {
  mscclppDeviceError* record; /* the rank's record (host-mapped for GPU ranks); NULL: not reported */
  uint32_t* claim;            /* the rank's claim word: 0 until the first timeout takes the record */
  uint64_t timeoutNs;         /* bound of each wait (MSCCLPP_DEVICE_WAIT_TIMEOUT) */
  int32_t rank;               /* the waiting rank */
  int32_t peer;               /* the rank waited for (-1: the proxy of this rank) */
  int32_t channel;            /* channel id given at creation */
  int32_t pad;
} mscclppWaitInfo;

/* The state of one wait. Initialize with MSCCLPP_SPIN_INIT. */
typedef struct {
  uint64_t start;  /* when the first check ran (0: not yet) */
  uint32_t spins;
} mscclppSpin;
#define MSCCLPP_SPIN_INIT {0, 0}

/* Records a timeout in the rank's record unless some wait already did. The claim decides who is
 * first; the winner fills the fields, then stores flag = 1 with release order (the host that
 * acquire-loads flag == 1 sees all fields). */
MSCCLPP_HOST_DEVICE_INLINE void mscclppWaitReport(const mscclppWaitInfo* w, uint32_t what, uint64_t expected,
                                                  uint64_t observed) {
  if (w->record == 0 || w->claim == 0) return;
  if (mscclppCasGpu32(w->claim, 0, 1) != 0) return;
  mscclppDeviceError* e = w->record;
  e->rank = w->rank;
  e->peer = w->peer;
  e->channel = w->channel;
  e->what = what;
  e->expected = expected;
  e->observed = observed;
  mscclppStoreRelease32(&e->flag, 1);
}

/* Call once per spin iteration of a wait. Returns MSCCLPP_DEVICE_OK to keep spinning, or the
 * failure the wait must return: TIMEOUT (the bound passed; reported with what/expected/observed)
 * or ABORTED (another wait of this rank failed first). Reads the clock every 256 spins only. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppSpinCheck(mscclppSpin* s, const mscclppWaitInfo* w, uint32_t what,
                                                uint64_t expected, uint64_t observed) {
  mscclppSpinRelax(++s->spins);
  if ((s->spins & 255u) != 0) return MSCCLPP_DEVICE_OK;
  uint64_t now = mscclppNowNs();
  if (s->start == 0) {
    s->start = now;
    return MSCCLPP_DEVICE_OK;
  }
  /* Relaxed is enough: the claim only says "give up", no data is read because of it. */
  if (w->claim != 0 && *(volatile uint32_t*)w->claim != 0) return MSCCLPP_DEVICE_ABORTED;
  if (now - s->start < w->timeoutNs) return MSCCLPP_DEVICE_OK;
  mscclppWaitReport(w, what, expected, observed);
  return MSCCLPP_DEVICE_TIMEOUT;
}

#ifdef __cplusplus
extern "C" {
#endif

/* Host side: copies the rank's device-error record into *out (out->flag == 0: no wait of the rank
 * timed out since the communicator's channels were made or the record was cleared). */
mscclppResult_t mscclppCommGetDeviceError(mscclppComm_t comm, mscclppDeviceError* out);
/* Clears the record so that later timeouts are reported again. Only while no kernel or host thread
 * of this rank is waiting on its channels. */
mscclppResult_t mscclppCommClearDeviceError(mscclppComm_t comm);
/* Writes a one-line description of a record ("rank 1 waited for rank 0 on channel 3: semaphore
 * step 5, saw 4, after the 2000 ms bound") into buf. */
mscclppResult_t mscclppDeviceErrorString(const mscclppDeviceError* e, char* buf, size_t len);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MSCCLPP_WAIT_H_ */
