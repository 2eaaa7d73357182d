/* mscclpp/port_channel.h - port channels: one GPU thread (or host thread of a CPU rank) pushes a
 * trigger into its rank's proxy FIFO and the proxy thread does the work through a connection:
 * copies by the copy engine (cuda-ipc), the shm or tcp transport; semaphore signals ordered after
 * those copies; flushes whose completion the pusher observes. Waits read a semaphore token the
 * peer's proxy advances. Compiles as C11, C++ and CUDA C++.
 *
 *   sender (one thread)                               receiver (one thread)
 *   putWithSignal(dstOff, srcOff, n) -- proxy -->     wait()
 *   flush()  (src may be reused after this)           the data is there
 *
 * Every operation returns MSCCLPP_DEVICE_OK, or TIMEOUT/ABORTED when a bounded wait failed (FIFO
 * full for too long, a flush the proxy never completed, a signal that never came); the rank's
 * device-error record says which (mscclppCommGetDeviceError). */
#ifndef MSCCLPP_PORT_CHANNEL_H_
#define MSCCLPP_PORT_CHANNEL_H_

#include <stdint.h>

#include <mscclpp/connection.h>
#include <mscclpp/device.h>
#include <mscclpp/fifo.h>
#include <mscclpp/semaphore_device.h>

typedef struct {
  mscclppFifoDevice fifo;    /* the rank's proxy FIFO */
  mscclppHostDevSemaphore sem; /* our token, advanced by the peer's proxy */
  uint32_t port;             /* which (connection, semaphore, dst, src) the proxy uses */
  uint32_t pad;
} mscclppPortChannel;

/* Pushes a put of any size, split into pieces of at most MSCCLPP_TRIGGER_CHUNK bytes; the last
 * piece also carries `extra` (FLAG/SYNC bits). *seq: the last trigger's slot. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppPortChannelPush(const mscclppPortChannel* ch, uint32_t extra, uint64_t dstOffset,
                                                      uint64_t srcOffset, uint64_t size, uint64_t* seq) {
  uint32_t data = size > 0 ? MSCCLPP_TRIGGER_DATA : 0u;
  while (size > MSCCLPP_TRIGGER_CHUNK) {
    int rc = mscclppFifoPush(&ch->fifo, mscclppTriggerMake(MSCCLPP_TRIGGER_DATA, ch->port, dstOffset, srcOffset,
                                                           MSCCLPP_TRIGGER_CHUNK), seq);
    if (rc != MSCCLPP_DEVICE_OK) return rc;
    dstOffset += MSCCLPP_TRIGGER_CHUNK;
    srcOffset += MSCCLPP_TRIGGER_CHUNK;
    size -= MSCCLPP_TRIGGER_CHUNK;
  }
  if ((data | extra) == 0) return MSCCLPP_DEVICE_OK; /* an empty put */
  return mscclppFifoPush(&ch->fifo, mscclppTriggerMake(data | extra, ch->port, dstOffset, srcOffset, size), seq);
}

/* Copies src[srcOffset, +size) to the peer's dst[dstOffset, +size), asynchronously. Neither
 * buffer may be touched in that range until a later flush returns (src) or the peer's wait for a
 * later signal returns (dst). The calling thread's earlier writes of src are copied. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppPortChannelPut(const mscclppPortChannel* ch, uint64_t dstOffset, uint64_t srcOffset,
                                                     uint64_t size) {
  uint64_t seq;
  return mscclppPortChannelPush(ch, 0, dstOffset, srcOffset, size, &seq);
}

/* Signals the peer: its next wait returns after every earlier put of this channel has landed. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppPortChannelSignal(const mscclppPortChannel* ch) {
  uint64_t seq;
  return mscclppFifoPush(&ch->fifo, mscclppTriggerMake(MSCCLPP_TRIGGER_FLAG, ch->port, 0, 0, 0), &seq);
}

/* put, then signal, in one trigger. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppPortChannelPutWithSignal(const mscclppPortChannel* ch, uint64_t dstOffset,
                                                               uint64_t srcOffset, uint64_t size) {
  uint64_t seq;
  return mscclppPortChannelPush(ch, MSCCLPP_TRIGGER_FLAG, dstOffset, srcOffset, size, &seq);
}

/* Waits until everything this channel's proxy was asked to do before - by any thread - has
 * completed at the peer; src may be reused afterwards. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppPortChannelFlush(const mscclppPortChannel* ch) {
  uint64_t seq;
  int rc = mscclppFifoPush(&ch->fifo, mscclppTriggerMake(MSCCLPP_TRIGGER_SYNC, ch->port, 0, 0, 0), &seq);
  return rc != MSCCLPP_DEVICE_OK ? rc : mscclppFifoSync(&ch->fifo, seq);
}

/* put, signal and flush in one trigger; returns when all three are done. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppPortChannelPutWithSignalAndFlush(const mscclppPortChannel* ch, uint64_t dstOffset,
                                                                       uint64_t srcOffset, uint64_t size) {
  uint64_t seq;
  int rc = mscclppPortChannelPush(ch, MSCCLPP_TRIGGER_FLAG | MSCCLPP_TRIGGER_SYNC, dstOffset, srcOffset, size, &seq);
  return rc != MSCCLPP_DEVICE_OK ? rc : mscclppFifoSync(&ch->fifo, seq);
}

/* Waits for the peer's next signal on this channel's semaphore (acquire: the data the peer's
 * proxy copied before that signal is visible). */
MSCCLPP_HOST_DEVICE_INLINE int mscclppPortChannelWait(const mscclppPortChannel* ch) {
  return mscclppHostDevSemaphoreWait(&ch->sem);
}
/* 1 (step consumed) when the peer's next signal has arrived, else 0. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppPortChannelPoll(const mscclppPortChannel* ch) {
  return mscclppHostDevSemaphorePoll(&ch->sem);
}

/* ---- host API -------------------------------------------------------------------------------- */

#ifdef __cplusplus
extern "C" {
#endif

/* A proxy service: the FIFO of this rank and the thread that consumes it (one per GPU is the
 * intended use). fifoSize: slots, a power of two >= 2 (0: MSCCLPP_PROXY_FIFO_SIZE). */
typedef struct mscclppProxyService* mscclppProxyService_t;

mscclppResult_t mscclppProxyServiceCreate(mscclppComm_t comm, int fifoSize, mscclppProxyService_t* proxy);
/* Starts the thread (GPU ranks: on the rank's device, pinned to the CPUs near it when
 * MSCCLPP_PROXY_CPU_AFFINITY allows). Start before launching kernels that push. */
mscclppResult_t mscclppProxyServiceStart(mscclppProxyService_t proxy);
/* Stops the thread after the trigger it is handling; triggers not yet handled stay in the FIFO
 * and are handled after the next start. Returns what mscclppProxyServiceCheck would. */
mscclppResult_t mscclppProxyServiceStop(mscclppProxyService_t proxy);
/* Stops it if running and frees it (the FIFO too: no kernel may use its channels any more). */
mscclppResult_t mscclppProxyServiceDestroy(mscclppProxyService_t proxy);
/* The first failure the thread met handling a trigger since the last check (Success: none); its
 * message becomes this thread's last error. The proxy retires failed triggers all the same, so
 * that no pusher waits forever; the failure is reported here and in the log. */
mscclppResult_t mscclppProxyServiceCheck(mscclppProxyService_t proxy);

/* Makes a host-to-device semaphore with conn's peer: both ranks call it for the connection, in the
 * same order. The peer's proxy signals it; this rank's port channels built on it wait on it.
 * *semId: its index in this proxy. */
mscclppResult_t mscclppProxyServiceAddSemaphore(mscclppProxyService_t proxy, mscclppConnection_t conn, int* semId);

/* A port channel (no communication): puts copy from src (this rank's registered memory) into dst
 * (the semaphore's peer's registered memory, imported here); signals go to semaphore semId.
 * dst and src may be NULL for a channel that only signals, waits and flushes. channelId names it
 * in timeout reports. Ports can be added while the proxy runs. */
mscclppResult_t mscclppPortChannelCreate(mscclppProxyService_t proxy, int semId, mscclppRegMem_t dst,
                                         mscclppRegMem_t src, int channelId, mscclppPortChannel* chan);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MSCCLPP_PORT_CHANNEL_H_ */
