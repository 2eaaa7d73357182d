/* fifo_host.h - the memory behind a proxy FIFO (mscclpp/fifo.h) and the consumer's side of it:
 * GPU ranks get host-pinned triggers and tail mapped into the device plus head and tail cache in
 * device memory; CPU ranks get host memory. Nothing here runs on a CUDA stream after setup. */
#ifndef MPP_PROXY_FIFO_HOST_H_
#define MPP_PROXY_FIFO_HOST_H_

#include <stdint.h>

#include <mscclpp/fifo.h>

struct fifo_host {
  int gpu;                      /* triggers and tail mapped into device dev, counters in its memory */
  int dev;
  uint32_t size;
  mscclppTrigger* triggers;     /* the host's view (what the consumer polls) */
  mscclppTrigger* triggers_dev; /* the producers' view (the device mapping for GPU ranks) */
  uint64_t* tail;               /* host memory the consumer stores the tail into */
  uint64_t* tail_dev;           /* ... as producers see it */
  uint64_t* head;               /* device memory (GPU) or host memory */
  uint64_t* tail_cache;         /* device memory (GPU); tail_dev for host FIFOs */
  mscclppFifoConsumer consumer;
};

/* Allocates a FIFO of size slots (a power of two) whose counters start at start (tests start
 * near 2^64 to cross the wrap). gpu != 0: for device dev (which must be usable). */
mscclppResult_t fifo_host_init(struct fifo_host* f, int gpu, int dev, uint32_t size, uint64_t start);
/* Frees it (no producer or consumer may use it any more). */
void fifo_host_fini(struct fifo_host* f);
/* The producers' handle; wait info is left zero for the caller to fill. */
void fifo_host_device(const struct fifo_host* f, mscclppFifoDevice* out);

#endif /* MPP_PROXY_FIFO_HOST_H_ */
