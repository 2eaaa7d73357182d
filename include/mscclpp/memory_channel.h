/* mscclpp/memory_channel.h - memory channels: a peer's buffer mapped into this rank (NVLink or PCIe
 * peer memory for GPU ranks, shared host memory for CPU ranks of one host), reached with plain
 * loads and stores, plus a device-to-device semaphore with that peer. Compiles as C11, C++ and
 * CUDA C++; the device functions also run on host threads of CPU ranks (the CPU interpreter).
 *
 * Cooperative operations take (tid, nthreads): every thread of the group calls them with its
 * index and the same other arguments, e.g. tid = blockIdx.x * blockDim.x + threadIdx.x and
 * nthreads = gridDim.x * blockDim.x, or one block's threadIdx.x and blockDim.x.
 *
 *   sender                                        receiver
 *   put(...)          (all threads)
 *   __syncthreads()
 *   signal()          (one thread)  ---------->   wait()            (one thread)
 *                                                 __syncthreads()
 *                                                 read the data     (all threads)
 *
 * Several blocks writing for one wait: each block signals after its own __syncthreads and the
 * receiver waits once per block (signals count; they are never lost). */
#ifndef MSCCLPP_MEMORY_CHANNEL_H_
#define MSCCLPP_MEMORY_CHANNEL_H_

#include <stdint.h>

#include <mscclpp/atomics.h>
#include <mscclpp/connection.h>
#include <mscclpp/copy.h>
#include <mscclpp/device.h>
#include <mscclpp/packet.h>
#include <mscclpp/semaphore_device.h>

typedef struct {
  mscclppMemoryDevSemaphore sem;
  void* remote;       /* the peer's buffer, mapped here (NULL: a semaphore-only channel) */
  void* local;        /* this rank's buffer that data is put from / got into */
  void* packetBuffer; /* this rank's buffer the peer's packets land in (NULL: none) */
  uint64_t pad;
} mscclppMemoryChannel;

/* ---- data ------------------------------------------------------------------------------------ */

/* local[localOffset, +bytes) -> the peer's remote[remoteOffset, +bytes). Cooperative. */
MSCCLPP_HOST_DEVICE_INLINE void mscclppMemoryChannelPut(const mscclppMemoryChannel* ch, uint64_t remoteOffset,
                                                        uint64_t localOffset, uint64_t bytes, uint32_t tid,
                                                        uint32_t nthreads) {
  mscclppCopy((char*)ch->remote + remoteOffset, (const char*)ch->local + localOffset, bytes, tid, nthreads);
}

/* The peer's remote[remoteOffset, +bytes) -> local[localOffset, +bytes). Cooperative. */
MSCCLPP_HOST_DEVICE_INLINE void mscclppMemoryChannelGet(const mscclppMemoryChannel* ch, uint64_t localOffset,
                                                        uint64_t remoteOffset, uint64_t bytes, uint32_t tid,
                                                        uint32_t nthreads) {
  mscclppCopy((char*)ch->local + localOffset, (const char*)ch->remote + remoteOffset, bytes, tid, nthreads);
}

/* One element of the peer's buffer (offset aligned to the element's size). */
MSCCLPP_HOST_DEVICE_INLINE uint32_t mscclppMemoryChannelRead32(const mscclppMemoryChannel* ch, uint64_t remoteOffset) {
  return *(const volatile uint32_t*)((const char*)ch->remote + remoteOffset);
}
MSCCLPP_HOST_DEVICE_INLINE uint64_t mscclppMemoryChannelRead64(const mscclppMemoryChannel* ch, uint64_t remoteOffset) {
  return *(const volatile uint64_t*)((const char*)ch->remote + remoteOffset);
}
MSCCLPP_HOST_DEVICE_INLINE void mscclppMemoryChannelWrite32(const mscclppMemoryChannel* ch, uint64_t remoteOffset,
                                                            uint32_t v) {
  *(volatile uint32_t*)((char*)ch->remote + remoteOffset) = v;
}
MSCCLPP_HOST_DEVICE_INLINE void mscclppMemoryChannelWrite64(const mscclppMemoryChannel* ch, uint64_t remoteOffset,
                                                            uint64_t v) {
  *(volatile uint64_t*)((char*)ch->remote + remoteOffset) = v;
}
#if defined(__CUDACC__)
__device__ __forceinline__ uint4 mscclppMemoryChannelRead128(const mscclppMemoryChannel* ch, uint64_t remoteOffset) {
  return *(const uint4*)((const char*)ch->remote + remoteOffset);
}
__device__ __forceinline__ void mscclppMemoryChannelWrite128(const mscclppMemoryChannel* ch, uint64_t remoteOffset,
                                                             uint4 v) {
  *(uint4*)((char*)ch->remote + remoteOffset) = v;
}
#endif

/* ---- synchronization ------------------------------------------------------------------------- */

/* Release: this thread's earlier writes (and those of the threads it synchronized with) are
 * visible to the peer once its matching wait returns. */
MSCCLPP_HOST_DEVICE_INLINE void mscclppMemoryChannelSignal(const mscclppMemoryChannel* ch) {
  mscclppMemoryDevSemaphoreSignal(&ch->sem);
}
MSCCLPP_HOST_DEVICE_INLINE void mscclppMemoryChannelRelaxedSignal(const mscclppMemoryChannel* ch) {
  mscclppMemoryDevSemaphoreRelaxedSignal(&ch->sem);
}
MSCCLPP_HOST_DEVICE_INLINE int mscclppMemoryChannelWait(const mscclppMemoryChannel* ch) {
  return mscclppMemoryDevSemaphoreWait(&ch->sem);
}
MSCCLPP_HOST_DEVICE_INLINE int mscclppMemoryChannelRelaxedWait(const mscclppMemoryChannel* ch) {
  return mscclppMemoryDevSemaphoreRelaxedWait(&ch->sem);
}
MSCCLPP_HOST_DEVICE_INLINE int mscclppMemoryChannelPoll(const mscclppMemoryChannel* ch) {
  return mscclppMemoryDevSemaphorePoll(&ch->sem);
}
/* Stores through peer memory complete when they are issued; flush only orders: this thread's
 * earlier writes are visible system-wide before its later ones (e.g. a relaxed signal). */
MSCCLPP_HOST_DEVICE_INLINE void mscclppMemoryChannelFlush(const mscclppMemoryChannel* ch) {
  (void)ch;
  mscclppFenceSys();
}

/* ---- packets ------------------------------------------------------------------------------------ */

/* local[localOffset, +bytes) -> LL16 packets at the peer's remote[remoteOffset...] (16-aligned;
 * 2 x bytes of packets). Cooperative; the packets carry their own flag, no signal is needed. */
MSCCLPP_HOST_DEVICE_INLINE void mscclppMemoryChannelPutPacketsLL16(const mscclppMemoryChannel* ch, uint64_t remoteOffset,
                                                                   uint64_t localOffset, uint64_t bytes, uint32_t flag,
                                                                   uint32_t tid, uint32_t nthreads) {
  mscclppPutPacketsLL16((mscclppLL16Packet*)((char*)ch->remote + remoteOffset), (const char*)ch->local + localOffset,
                        bytes, flag, tid, nthreads);
}
/* LL16 packets at packetBuffer[packetOffset...] -> local[localOffset, +bytes), waiting for each
 * packet's flag. Returns MSCCLPP_DEVICE_OK or the failed wait's code. Cooperative. */
MSCCLPP_HOST_DEVICE_INLINE int mscclppMemoryChannelUnpackPacketsLL16(const mscclppMemoryChannel* ch, uint64_t localOffset,
                                                                     uint64_t packetOffset, uint64_t bytes, uint32_t flag,
                                                                     uint32_t tid, uint32_t nthreads) {
  return mscclppUnpackPacketsLL16((char*)ch->local + localOffset,
                                  (const mscclppLL16Packet*)((const char*)ch->packetBuffer + packetOffset), bytes, flag,
                                  tid, nthreads, &ch->sem.wait);
}
MSCCLPP_HOST_DEVICE_INLINE void mscclppMemoryChannelPutPacketsLL8(const mscclppMemoryChannel* ch, uint64_t remoteOffset,
                                                                  uint64_t localOffset, uint64_t bytes, uint32_t flag,
                                                                  uint32_t tid, uint32_t nthreads) {
  mscclppPutPacketsLL8((mscclppLL8Packet*)((char*)ch->remote + remoteOffset), (const char*)ch->local + localOffset,
                       bytes, flag, tid, nthreads);
}
MSCCLPP_HOST_DEVICE_INLINE int mscclppMemoryChannelUnpackPacketsLL8(const mscclppMemoryChannel* ch, uint64_t localOffset,
                                                                    uint64_t packetOffset, uint64_t bytes, uint32_t flag,
                                                                    uint32_t tid, uint32_t nthreads) {
  return mscclppUnpackPacketsLL8((char*)ch->local + localOffset,
                                 (const mscclppLL8Packet*)((const char*)ch->packetBuffer + packetOffset), bytes, flag,
                                 tid, nthreads, &ch->sem.wait);
}

/* ---- host API -------------------------------------------------------------------------------- */

#ifdef __cplusplus
extern "C" {
#endif

/* Makes this side of a device-to-device semaphore with conn's peer. Both ranks call it for the
 * connection (semaphores of one connection in the same order on both sides). The connection's
 * transport must map the peer's memory here: p2p between GPU ranks, shm between CPU ranks of one
 * host. channelId names the semaphore in timeout reports. The tokens live until the communicator's
 * channels are released (mscclppCommReleaseChannels). */
mscclppResult_t mscclppMemoryDevSemaphoreCreate(mscclppComm_t comm, mscclppConnection_t conn, int channelId,
                                                mscclppMemoryDevSemaphore* sem);

/* A channel from a semaphore and buffers (no communication): remote is the peer's registered
 * memory imported and mapped here (NULL for a semaphore-only channel), local this rank's own
 * registered memory (may be NULL), packetBuffer where the peer's packets to this rank land (any
 * local pointer the peer's channel has as its remote; may be NULL). */
mscclppResult_t mscclppMemoryChannelMake(const mscclppMemoryDevSemaphore* sem, mscclppRegMem_t remote,
                                         mscclppRegMem_t local, void* packetBuffer, mscclppMemoryChannel* chan);

/* mscclppMemoryDevSemaphoreCreate, then mscclppMemoryChannelMake. Both ranks call it. */
mscclppResult_t mscclppMemoryChannelCreate(mscclppComm_t comm, mscclppConnection_t conn, mscclppRegMem_t remote,
                                           mscclppRegMem_t local, void* packetBuffer, int channelId,
                                           mscclppMemoryChannel* chan);

/* Releases what the communicator's channels hold (semaphore tokens, imported token memory, the
 * device-error record, the seed API's connections and proxy). No kernel or thread may use any of
 * its channels afterwards. Called by mscclppCommDestroy too; calling it earlier is allowed. */
mscclppResult_t mscclppCommReleaseChannels(mscclppComm_t comm);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MSCCLPP_MEMORY_CHANNEL_H_ */
