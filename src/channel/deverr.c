/* deverr.c - the host's view of the device-error record that bounded device-side waits fill. */
#include <mscclpp/wait.h>

#include <stdio.h>
#include <string.h>

#include "channel/ext.h"
#include "core/comm.h"
#include "sys/cudawrap.h"
#include "util/err.h"

mscclppResult_t mscclppCommGetDeviceError(mscclppComm_t comm, mscclppDeviceError* out) {
  err_clear();
  COMM_CHECK_SHARED(comm); /* a watchdog thread may poll beside a running call */
  MPP_CHECK_ARG(out != NULL, "mscclppCommGetDeviceError: out is NULL");
  memset(out, 0, sizeof(*out));
  struct chan_ext* x = chan_ext_find(comm);
  if (x == NULL) return mscclppSuccess;
  /* Acquire: pairs with the winner's release store of flag = 1; every field below is complete. */
  if (__atomic_load_n(&x->rec_host->flag, __ATOMIC_ACQUIRE) != 1) return mscclppSuccess;
  *out = *(volatile mscclppDeviceError*)x->rec_host;
  out->flag = 1;
  return mscclppSuccess;
}

int chan_ext_device_record(const struct chan_ext* x, char* buf, size_t len) {
  buf[0] = '\0';
  /* Acquire: pairs with the failing wait's release store of flag = 1; the fields are complete. */
  if (x == NULL || x->rec_host == NULL || __atomic_load_n(&x->rec_host->flag, __ATOMIC_ACQUIRE) != 1) return 0;
  mscclppDeviceError e = *(volatile mscclppDeviceError*)x->rec_host;
  e.flag = 1;
  if (mscclppDeviceErrorString(&e, buf, len) != mscclppSuccess) buf[0] = '\0';
  return 1;
}

mscclppResult_t mscclppCommClearDeviceError(mscclppComm_t comm) {
  err_clear();
  COMM_CHECK(comm);
  struct chan_ext* x = chan_ext_find(comm);
  if (x == NULL) return mscclppSuccess;
  memset(x->rec_host, 0, sizeof(*x->rec_host));
  if (!x->gpu) {
    /* Release: a wait that sees the claim free again also sees the cleared record. */
    __atomic_store_n(x->claim, 0u, __ATOMIC_RELEASE);
    return mscclppSuccess;
  }
#if MSCCLPP_HAVE_CUDA
  int prev = ext_dev_enter(x->dev);
  cudaError_t ce = cudaMemset(x->claim, 0, sizeof(uint32_t));
  if (ce == cudaSuccess) ce = cudaDeviceSynchronize();
  ext_dev_leave(prev, x->dev);
  if (ce != cudaSuccess) return cuda_error(ce, "mscclppCommClearDeviceError: clearing the claim word", __FILE__, __LINE__);
#endif
  return mscclppSuccess;
}

static const char* what_name(uint32_t what) {
  switch (what) {
    case mscclppWaitSemaphore: return "semaphore step";
    case mscclppWaitPacket: return "packet flag";
    case mscclppWaitFifoFull: return "free proxy FIFO slot (tail)";
    case mscclppWaitFifoSync: return "proxy flush of FIFO slot";
    default: return "unknown wait";
  }
}

mscclppResult_t mscclppDeviceErrorString(const mscclppDeviceError* e, char* buf, size_t len) {
  err_clear();
  MPP_CHECK_ARG(e != NULL && buf != NULL && len > 0, "mscclppDeviceErrorString: NULL argument");
  if (e->flag != 1) {
    snprintf(buf, len, "no device-side wait timed out");
    return mscclppSuccess;
  }
  char peer[32];
  if (e->peer >= 0)
    snprintf(peer, sizeof(peer), "rank %d", e->peer);
  else
    snprintf(peer, sizeof(peer), "its proxy");
  snprintf(buf, len, "rank %d timed out waiting for %s on channel %d: %s %llu, last saw %llu", e->rank, peer, e->channel,
           what_name(e->what), (unsigned long long)e->expected, (unsigned long long)e->observed);
  return mscclppSuccess;
}
